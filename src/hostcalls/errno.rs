//! The WASI preview1 errno values our shadowed calls answer with (from the witx typenames).

pub const SUCCESS: i32 = 0;
pub const ACCES: i32 = 2;
pub const BADF: i32 = 8;
pub const BUSY: i32 = 10;
pub const EXIST: i32 = 20;
pub const FAULT: i32 = 21;
pub const INVAL: i32 = 28;
pub const IO: i32 = 29;
pub const ISDIR: i32 = 31;
pub const LOOP: i32 = 32;
pub const MFILE: i32 = 33;
pub const NAMETOOLONG: i32 = 37;
pub const NOENT: i32 = 44;
pub const NOMEM: i32 = 48;
pub const NOSPC: i32 = 51;
pub const NOTDIR: i32 = 54;
pub const NOTEMPTY: i32 = 55;
pub const PERM: i32 = 63;
pub const ROFS: i32 = 69;
pub const XDEV: i32 = 75;

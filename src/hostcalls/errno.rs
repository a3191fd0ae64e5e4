//! The WASI preview1 errno values our shadowed calls answer with (from the witx typenames).

pub const SUCCESS: i32 = 0;
pub const FAULT: i32 = 21;
pub const INVAL: i32 = 28;
pub const MFILE: i32 = 33;
pub const NOMEM: i32 = 48;
pub const NOSPC: i32 = 51;
pub const PERM: i32 = 63;

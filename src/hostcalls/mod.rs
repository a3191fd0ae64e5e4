//! What the linker gives a guest, and the store data those functions work on: WASI with our
//! shadows over it (the descriptor cap and disk quota in [`fs_guard`], the sleeping
//! [`poll`]), the `host::call` [`door`], and bounds-checked guest memory access.
//!
//! Every function here is called by guest code with guest-chosen arguments: each pointer is
//! checked against the memory's size ([`guest_memory::range`]) and each length is unsigned.

pub mod charge;
pub mod door;
pub mod egress;
pub mod egress_door;
pub mod errno;
pub mod fs_guard;
pub mod guest_memory;
pub mod input;
pub mod limiter;
pub mod live_output;
pub mod mount_calls;
pub mod mounts;
pub mod poll;
pub mod reply;
pub mod state;
pub mod tool_door;
pub mod tools;

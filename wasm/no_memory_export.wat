;; Calls shadowed and stock WASI functions from a module that exports no memory: the host must
;; answer with an error or a clean trap, never by touching memory it cannot see.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "host" "call" (func $door (param i32 i32 i32 i32) (result i32)))
  (memory 1)
  (func (export "run") (result i32)
    (i32.add
      (i32.add (call $door (i32.const 0) (i32.const 100) (i32.const 0) (i32.const 4))
               (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))
      (i32.add (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))
               (call $path_open (i32.const 5) (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 1) (i64.const -1) (i64.const -1) (i32.const 0) (i32.const 8))))))

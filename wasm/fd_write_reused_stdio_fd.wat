;; Closes fd 0 (stdin), opens a new file (which takes descriptor 0), and writes 64 KiB at a
;; time through it until refused; returns the KiB written. OPEN BUG: the fd_write shadow counts
;; only fds >= 3 against the quota, so this writes without bound (the test stops at 16 MiB).
;; See tests/hostile_regressions.rs.
(module
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 3)
  (data (i32.const 1024) "reused.bin")
  (func (export "run") (result i32)
    (local $fd i32) (local $total i32)
    (drop (call $fd_close (i32.const 0)))
    ;; O_CREAT | O_TRUNC
    (if (i32.ne (call $path_open (i32.const 5) (i32.const 0) (i32.const 1024) (i32.const 10) (i32.const 9)
                  (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 2048)) (i32.const 0))
      (then (return (i32.const -1))))
    (local.set $fd (i32.load (i32.const 2048)))
    (i32.store (i32.const 3072) (i32.const 65536))
    (i32.store (i32.const 3076) (i32.const 65536))
    (block $done
      (loop $w
        (br_if $done (i32.ne (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080)) (i32.const 0)))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 3080))))
        (br_if $done (i32.ge_u (local.get $total) (i32.const 0x1000000)))
        (br $w)))
    (i32.shr_u (local.get $total) (i32.const 10))))

;; fd_seek 1 TiB past the start of a new file, then fd_write one byte; then one-byte writes a
;; block apart. Returns the errno of the far write (0 = it was allowed) in the high half and
;; the number of one-byte block writes allowed in the low half. Was a quota bypass (the
;; fd_write shadow charged bytes written, not where they land); see tests/hostile_regressions.rs.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_seek"
    (func $fd_seek (param i32 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "sparse.bin")
  (data (i32.const 3072) "\00\10\00\00\01\00\00\00")
  (func (export "run") (result i32)
    (local $fd i32) (local $rc i32) (local $n i32)
    (if (i32.ne (call $path_open (i32.const 5) (i32.const 0) (i32.const 1024) (i32.const 10) (i32.const 9)
                  (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 2048)) (i32.const 0))
      (then (return (i32.const -1))))
    (local.set $fd (i32.load (i32.const 2048)))
    (drop (call $fd_seek (local.get $fd) (i64.const 0x10000000000) (i32.const 0) (i32.const 2056)))
    (local.set $rc (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080)))
    (block $done
      (loop $w
        (drop (call $fd_seek (local.get $fd) (i64.extend_i32_u (i32.shl (local.get $n) (i32.const 12))) (i32.const 0) (i32.const 2056)))
        (br_if $done (i32.ne (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080)) (i32.const 0)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br_if $w (i32.lt_u (local.get $n) (i32.const 4096)))))
    (i32.or (i32.shl (local.get $rc) (i32.const 16)) (local.get $n))))

;; Creates a file in the writable root and writes 64 KiB at a time until fd_write refuses
;; (ENOSPC, 51); then one write whose 1 024 iovecs all point at the same 64 KiB (64 MiB asked in
;; one call). Returns the KiB written. Host invariant: the working directory stays within the
;; disk quota.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 4)
  (data (i32.const 1024) "flood.bin")
  (func (export "run") (result i32)
    (local $fd i32) (local $total i32) (local $rc i32) (local $i i32)
    ;; O_CREAT | O_TRUNC
    (if (i32.ne (call $path_open (i32.const 5) (i32.const 0) (i32.const 1024) (i32.const 9) (i32.const 9)
                  (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 2048)) (i32.const 0))
      (then (return (i32.const -1))))
    (local.set $fd (i32.load (i32.const 2048)))
    ;; iovec at 3072: { buf = 65536, len = 65536 }
    (i32.store (i32.const 3072) (i32.const 65536))
    (i32.store (i32.const 3076) (i32.const 65536))
    (block $done
      (loop $w
        (local.set $rc (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080)))
        (br_if $done (i32.ne (local.get $rc) (i32.const 0)))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 3080))))
        (br_if $done (i32.gt_u (local.get $total) (i32.const 0x40000000)))
        (br $w)))
    ;; 1 024 iovecs at 131072, each { 65536, 65536 }
    (local.set $i (i32.const 0))
    (loop $fill
      (i32.store (i32.add (i32.const 131072) (i32.shl (local.get $i) (i32.const 3))) (i32.const 65536))
      (i32.store (i32.add (i32.const 131076) (i32.shl (local.get $i) (i32.const 3))) (i32.const 65536))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 1024))))
    (if (i32.eq (call $fd_write (local.get $fd) (i32.const 131072) (i32.const 1024) (i32.const 3080)) (i32.const 0))
      (then (local.set $total (i32.add (local.get $total) (i32.load (i32.const 3080))))))
    (i32.shr_u (local.get $total) (i32.const 10))))

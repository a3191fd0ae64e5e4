;; Opens "." on the writable root (fd 5) and the stdlib mount (fd 3) without closing, until
;; path_open refuses (EMFILE, 33, from the descriptor cap); returns how many opened. Host
;; invariant: the count stops at the cap, the host process's descriptors come back after the
;; store is dropped.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) ".")
  (func (export "run") (result i32)
    (local $n i32) (local $rc i32)
    (block $done
      (loop $open
        (local.set $rc
          (call $path_open (select (i32.const 5) (i32.const 3) (i32.and (local.get $n) (i32.const 1)))
            (i32.const 0) (i32.const 1024) (i32.const 1) (i32.const 2)
            (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 2048)))
        (br_if $done (i32.ne (local.get $rc) (i32.const 0)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br_if $done (i32.gt_u (local.get $n) (i32.const 100000)))
        (br $open)))
    ;; the errno in the high half, the count in the low half
    (i32.or (i32.shl (local.get $rc) (i32.const 16)) (local.get $n))))

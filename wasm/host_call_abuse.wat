;; The host door with out-of-bounds, wrapping, overlapping and huge arguments, and a valid
;; result-tagged request whose answer slots overlap the request. Returns the XOR of the
;; answers; host invariant: no panic, no write outside the memory.
(module
  (import "host" "call" (func $door (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 20)
  ;; the result tag at 0: "\0vivarium-result\0" (17 bytes), then text
  (data (i32.const 0) "\00vivarium-result\00hello from wasm")
  (func $c (param i32 i32 i32 i32) (param $acc i32) (result i32)
    (i32.xor (local.get $acc) (call $door (local.get 0) (local.get 1) (local.get 2) (local.get 3))))
  (func (export "run") (result i32)
    (local $a i32)
    (local.set $a (call $c (i32.const -16) (i32.const 32) (i32.const 0) (i32.const 4) (local.get $a)))
    (local.set $a (call $c (i32.const 0) (i32.const -1) (i32.const 0) (i32.const 4) (local.get $a)))
    (local.set $a (call $c (i32.const 0) (i32.const 0x7fffffff) (i32.const 0) (i32.const 4) (local.get $a)))
    (local.set $a (call $c (i32.const 0) (i32.const 32) (i32.const -4) (i32.const -2) (local.get $a)))
    (local.set $a (call $c (i32.const 0) (i32.const 32) (i32.const 1310718) (i32.const 4) (local.get $a)))
    ;; answer slots overlapping the request itself
    (local.set $a (call $c (i32.const 0) (i32.const 32) (i32.const 0) (i32.const 2) (local.get $a)))
    ;; a request running exactly to the end of memory (20 pages = 1 310 720 bytes)
    (local.set $a (call $c (i32.const 1310700) (i32.const 20) (i32.const 0) (i32.const 4) (local.get $a)))
    (local.set $a (call $c (i32.const 1310701) (i32.const 20) (i32.const 0) (i32.const 4) (local.get $a)))
    ;; the largest accepted result (1 MiB + tag), and one byte more
    (local.set $a (call $c (i32.const 0) (i32.const 1048593) (i32.const 1048600) (i32.const 1048604) (local.get $a)))
    (local.set $a (call $c (i32.const 0) (i32.const 1048594) (i32.const 1048600) (i32.const 1048604) (local.get $a)))
    (local.get $a))
  ;; the largest result, sent until fuel or the deadline stops it
  (func (export "flood") (result i32)
    (loop $l
      (drop (call $door (i32.const 0) (i32.const 1048593) (i32.const 1048600) (i32.const 1048604)))
      (br $l))
    (i32.const 0)))

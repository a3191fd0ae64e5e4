;; Recursion with large frames (many locals and v128 values live across the call).
(module
  (memory (export "memory") 1)
  (func $f (param $n i64) (result i64)
    (local $a v128) (local $b v128) (local $c v128) (local $d v128)
    (local $e v128) (local $g v128) (local $h v128) (local $i v128)
    (local.set $a (i64x2.splat (local.get $n)))
    (local.set $b (i64x2.add (local.get $a) (local.get $a)))
    (local.set $c (i64x2.add (local.get $b) (local.get $a)))
    (local.set $d (i64x2.add (local.get $c) (local.get $b)))
    (local.set $e (i64x2.add (local.get $d) (local.get $c)))
    (local.set $g (i64x2.add (local.get $e) (local.get $d)))
    (local.set $h (i64x2.add (local.get $g) (local.get $e)))
    (local.set $i (i64x2.add (local.get $h) (local.get $g)))
    (i64.add
      (call $f (i64.add (local.get $n) (i64.const 1)))
      (i64x2.extract_lane 0
        (i64x2.add (local.get $i)
          (i64x2.add (local.get $a) (i64x2.add (local.get $b) (i64x2.add (local.get $c)
            (i64x2.add (local.get $d) (i64x2.add (local.get $e) (i64x2.add (local.get $g) (local.get $h)))))))))))
  (func (export "run") (result i32) (i32.wrap_i64 (call $f (i64.const 0)))))

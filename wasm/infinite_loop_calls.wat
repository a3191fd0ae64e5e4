;; An endless loop of wasm-to-wasm calls, through a direct call and call_indirect.
(module
  (memory (export "memory") 1)
  (type $t (func (param i32) (result i32)))
  (table 1 funcref)
  (elem (i32.const 0) $inc)
  (func $inc (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func (export "run") (result i32)
    (local $x i32)
    (loop $l
      (local.set $x (call $inc (local.get $x)))
      (local.set $x (call_indirect (type $t) (local.get $x) (i32.const 0)))
      (br $l))
    (local.get $x)))

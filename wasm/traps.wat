;; Ordinary traps: unreachable, integer division by zero, an out-of-bounds load, a null
;; call_indirect. Each export must end the call with a trap and nothing else.
(module
  (memory (export "memory") 1)
  (type $t (func (result i32)))
  (table 2 funcref)
  (func (export "run") (result i32) (unreachable))
  (func (export "div0") (result i32) (i32.div_u (i32.const 1) (i32.const 0)))
  (func (export "load_oob") (result i32) (i32.load (i32.const -4)))
  (func (export "null_indirect") (result i32) (call_indirect (type $t) (i32.const 1))))

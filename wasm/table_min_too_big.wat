;; A table whose minimum (1 000 000 elements) is above the limit: instantiation must fail.
(module
  (memory (export "memory") 1)
  (table 1000000 funcref)
  (func (export "run") (result i32) (i32.const 0)))

;; A tight loop without calls: fuel (or the epoch deadline) must stop it.
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (loop $l (br $l))
    (i32.const 0)))

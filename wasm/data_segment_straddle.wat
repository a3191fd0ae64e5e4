;; A passive data segment copied across the end of memory with memory.init, and memory.copy /
;; memory.fill with huge lengths: each must trap (out of bounds), not write past the memory.
(module
  (memory (export "memory") 1)
  (data $d "0123456789abcdef0123456789abcdef")
  (func (export "run") (result i32)
    (memory.init $d (i32.const 65530) (i32.const 0) (i32.const 32))
    (i32.const 1)))

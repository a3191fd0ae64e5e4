;; A data segment placed at the very end of the 32-bit address space, far past the memory:
;; instantiation must fail (out-of-bounds initialisation), not write anywhere.
(module
  (memory (export "memory") 1)
  (data (i32.const 0xfffffff0) "0123456789abcdefXXXXXXXXXXXXXXXX")
  (func (export "run") (result i32) (i32.const 0)))

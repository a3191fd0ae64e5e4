;; memory.fill and memory.copy with lengths of 4 GiB - 1 from inside a 1-page memory: must
;; trap out of bounds.
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (memory.copy (i32.const 0) (i32.const 16) (i32.const -1))
    (memory.fill (i32.const 8) (i32.const 0x41) (i32.const -1))
    (i32.const 1)))

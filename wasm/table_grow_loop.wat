;; Grows the table 10 000 elements at a time until refused; returns the final size. Host
;; invariant: the limiter stops it at MAX_TABLE_ELEMENTS (100 000).
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "run") (result i32)
    (block $done
      (loop $grow
        (br_if $done (i32.eq (table.grow $t (ref.null func) (i32.const 10000)) (i32.const -1)))
        (br $grow)))
    (table.size $t))
  ;; one absurd delta (wasmtime charges fuel per element, so this may end as out-of-fuel)
  (func (export "grow_absurd") (result i32)
    (table.grow $t (ref.null func) (i32.const 0x7fffffff))))

;; Grows linear memory one page at a time until the store limiter refuses; returns the final
;; size in pages. Host invariant: growth stops at the memory limit (memory.grow answers -1,
;; no trap), the call returns, nothing outside the sandbox changes.
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (block $done
      (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        ;; touch the new page so it is really committed
        (i32.store (i32.sub (i32.mul (memory.size) (i32.const 65536)) (i32.const 4)) (i32.const 1))
        (br $grow)))
    (memory.size)))

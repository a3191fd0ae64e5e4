;; Single huge memory.grow requests (4 GiB, 65535 pages, i32::MAX pages): each must answer -1.
;; Returns how many of them were granted (must be 0).
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (i32.add
      (i32.add
        (i32.ne (memory.grow (i32.const 65535)) (i32.const -1))
        (i32.ne (memory.grow (i32.const 0x7fffffff)) (i32.const -1)))
      (i32.ne (memory.grow (i32.const -1)) (i32.const -1)))))

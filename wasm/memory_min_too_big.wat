;; A module whose memory minimum (65536 pages = 4 GiB) is above the limit: instantiation must
;; fail cleanly (the limiter refuses), nothing is reserved.
(module
  (memory (export "memory") 65536)
  (func (export "run") (result i32) (i32.const 0)))

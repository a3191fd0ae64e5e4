;; Unbounded recursion: must end with a stack-overflow trap, on the guest's 8 MiB wasm stack,
;; without touching the host thread's guard page.
(module
  (memory (export "memory") 1)
  (func $f (param i32) (result i32)
    (i32.add (call $f (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
  (func (export "run") (result i32) (call $f (i32.const 0))))

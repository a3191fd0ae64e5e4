;; An endless loop of host calls (sched_yield, clock_time_get, random_get): host time is spent
;; outside wasm, so the epoch deadline (or fuel between calls) must still stop it.
(module
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (loop $l
      (drop (call $yield))
      (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 64)))
      (drop (call $random (i32.const 128) (i32.const 4096)))
      (br $l))
    (i32.const 0)))

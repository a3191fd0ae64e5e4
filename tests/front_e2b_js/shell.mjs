// The shell behind `commands.run` and `runCode(…, {language: "bash"})` (issue 49), through
// the published, unpatched E2B JavaScript SDKs, configured as run.mjs is (E2B_API_KEY,
// E2B_API_URL, E2B_SANDBOX_URL). tests/server/front_e2b_shell.rs runs it.
//
// Each step prints `ok NAME` when it passes, `FAIL NAME` and its error when it does not; the
// run goes on to the next step. The last line is `steps: PASSED/TOTAL`; the exit code is
// non-zero if any step failed.
import assert from "node:assert/strict";
import { Sandbox } from "@e2b/code-interpreter";
import { CommandExitError } from "e2b";

let failures = 0;
let passed = 0;

async function step(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`ok ${name}`);
  } catch (e) {
    failures += 1;
    console.log(`FAIL ${name}`);
    const extra = ["exitCode", "stdout", "stderr"]
      .filter((k) => e?.[k] !== undefined)
      .map((k) => `${k}=${JSON.stringify(e[k])}`)
      .join(" ");
    console.log(`    ${e?.constructor?.name ?? "Error"}: ${e?.message ?? e} ${extra}`);
  }
}

/** Asserts that `promise` rejects with a CommandExitError passing `check`. */
async function exits(promise, check) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof CommandExitError, `expected CommandExitError, got ${e?.constructor?.name}: ${e?.message}`);
    check(e);
    return true;
  });
}

const sbx = await Sandbox.create({ timeoutMs: 120_000, envs: { FROM_CREATE: "made" } });
try {
  await sbx.files.write("a.txt", "A\n");
  await sbx.files.write("b.txt", "B\n");
  await sbx.files.write("c.csv", "x,y\n");

  await step("a pipeline: ls -la | grep txt", async () => {
    const r = await sbx.commands.run("ls -la | grep txt");
    assert.equal(r.exitCode, 0);
    assert.ok(r.stdout.includes("a.txt") && r.stdout.includes("b.txt"), r.stdout);
    assert.ok(!r.stdout.includes("c.csv"), r.stdout);
    assert.equal(r.stdout.trim().split("\n").length, 2, r.stdout);
  });

  await step("redirections and ; : python3 -c … > out.txt 2>&1; cat out.txt", async () => {
    const r = await sbx.commands.run("python3 -c 'import sys; print(1); print(2, file=sys.stderr)' > out.txt 2>&1; cat out.txt");
    // As CPython does with its stdout redirected to a file (block-buffered, written at exit)
    // and stderr line-buffered: stderr's line lands first.
    assert.equal(r.stdout, "2\n1\n");
    assert.equal(r.stderr, "");
    assert.equal(await sbx.files.read("out.txt"), "2\n1\n");
  });

  await step("cd within a command, not beyond it", async () => {
    assert.equal((await sbx.commands.run("cd /tmp && pwd")).stdout, "/tmp\n");
    assert.equal((await sbx.commands.run("pwd")).stdout, "/home/user\n");
    assert.equal((await sbx.commands.run("export X=1; echo ${X:-unset}")).stdout, "1\n");
    assert.equal((await sbx.commands.run("echo ${X:-unset}")).stdout, "unset\n");
  });

  await step("exit 3 rejects with CommandExitError, exitCode 3", async () => {
    await exits(sbx.commands.run("echo before; exit 3"), (e) => {
      assert.equal(e.exitCode, 3);
      assert.equal(e.stdout, "before\n");
    });
  });

  await step("a command not found: 127, bash's message", async () => {
    await exits(sbx.commands.run("nosuch --flag"), (e) => {
      assert.equal(e.exitCode, 127);
      assert.ok(e.stderr.includes("nosuch: command not found"), e.stderr);
    });
  });

  await step("cwd and envs as arguments; the sandbox's envs", async () => {
    await sbx.commands.run("mkdir -p sub && echo inside > sub/f.txt");
    assert.equal((await sbx.commands.run("cat f.txt", { cwd: "/home/user/sub" })).stdout, "inside\n");
    assert.equal((await sbx.commands.run("pwd", { cwd: "/tmp" })).stdout, "/tmp\n");
    const r = await sbx.commands.run('echo "$GREETING $FROM_CREATE"', { envs: { GREETING: "hi" } });
    assert.equal(r.stdout, "hi made\n");
    assert.equal((await sbx.commands.run("echo ${GREETING:-gone}")).stdout, "gone\n");
  });

  await step("output streamed: onStdout sees each line", async () => {
    const live = [];
    const r = await sbx.commands.run("for i in 1 2 3; do echo line $i; done", { onStdout: (d) => live.push(d) });
    assert.equal(r.stdout, "line 1\nline 2\nline 3\n");
    assert.equal(live.join(""), r.stdout);
  });

  await step("runCode(…, {language: 'bash'}): output, and cd/export kept between its cells", async () => {
    const ex = await sbx.runCode("echo hi", { language: "bash" });
    assert.deepEqual(ex.logs.stdout, ["hi\n"]);
    assert.equal(ex.error, undefined);
    await sbx.runCode("export KEPT=yes", { language: "bash" });
    const again = await sbx.runCode("echo $KEPT", { language: "bash" });
    assert.deepEqual(again.logs.stdout, ["yes\n"]);
  });

  await step("runCode bash: a non-zero status is the cell's error", async () => {
    const ex = await sbx.runCode("false", { language: "bash" });
    assert.ok(ex.error, "no error");
    assert.equal(ex.error.value, "1");
  });
} finally {
  await Sandbox.kill(sbx.sandboxId).catch(() => {});
}

console.log(`steps: ${passed}/${passed + failures}`);
process.exitCode = failures === 0 ? 0 : 1;

// Drives Vivarium's E2B-compatible door with the published, unpatched E2B JavaScript SDKs
// (`e2b`, `@e2b/code-interpreter`), configured only as a user configures them: the
// environment's E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL (both URLs
// http://HOST:PORT/e2b). tests/server/front_e2b.rs installs the packages with
// `npm install --prefix tests/front_e2b_js`, sets the environment and runs this file.
//
// Each step is asserted with node's assert/strict and prints one `ok` line when it passes;
// a failing step prints `FAIL`, its error, and the run goes on to the next step (a step
// whose sandbox could not be made is skipped). The last line is `JSON:` and the timings:
// {"create_to_first_result_ms": [5 values], "run_code_ms": [50 values]}. The exit code is
// non-zero if any step failed.
import assert from "node:assert/strict";
import { Sandbox } from "@e2b/code-interpreter";
import { CommandExitError, NotFoundError } from "e2b";

for (const name of ["E2B_API_KEY", "E2B_API_URL", "E2B_SANDBOX_URL"]) {
  assert.ok(process.env[name], `${name} must be set`);
}
console.log(`E2B_API_URL=${process.env.E2B_API_URL} E2B_SANDBOX_URL=${process.env.E2B_SANDBOX_URL}`);

const HOME = "/home/user";
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const started = performance.now();
let failures = 0;
let passed = 0;

/** Runs one step: `ok NAME` when it passes, `FAIL NAME` and the error when it does not. */
async function step(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`ok ${name}`);
    return true;
  } catch (e) {
    failures += 1;
    console.log(`FAIL ${name}`);
    console.log(indent(describe(e)));
    return false;
  }
}

function describe(e) {
  if (!(e instanceof Error)) return String(e);
  const extra = [];
  for (const k of ["exitCode", "stdout", "stderr"]) {
    if (e[k] !== undefined) extra.push(`${k}=${JSON.stringify(e[k])}`);
  }
  if (e.cause !== undefined) extra.push(`cause=${e.cause?.message ?? String(e.cause)}`);
  const head = `${e.constructor?.name ?? "Error"}: ${e.message}`;
  const stack = (e.stack ?? "").split("\n").slice(1, 6).join("\n");
  return [head, extra.join(" "), stack].filter(Boolean).join("\n");
}

function indent(text) {
  return text
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");
}

/** A cell that must run without an error; its execution. */
async function cell(sbx, code, opts) {
  const ex = await sbx.runCode(code, opts);
  assert.equal(ex.error, undefined, `cell ${JSON.stringify(code)} raised ${JSON.stringify(ex.error)}`);
  return ex;
}

/** Asserts that `promise` rejects with an instance of `cls` passing `check`. */
async function rejectsWith(promise, cls, check = () => {}) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
    check(e);
    return true;
  });
}

const round = (ms) => Math.round(ms * 10) / 10;

// ---------------------------------------------------------------------------------------
// 1. Create.
let sbx;
await step("1 create: Sandbox.create({timeoutMs, metadata, envs}) gives an s- id", async () => {
  sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: "js" }, envs: { FOO: "bar" } });
  assert.equal(typeof sbx.sandboxId, "string");
  assert.ok(sbx.sandboxId.startsWith("s-"), `sandboxId ${sbx.sandboxId}`);
});

const timings = { create_to_first_result_ms: [], run_code_ms: [] };

if (sbx) {
  try {
    await scenario(sbx);
  } finally {
    // Whatever happened, the sandbox goes (a second kill answers false, harmlessly).
    await Sandbox.kill(sbx.sandboxId).catch(() => {});
  }
}
await step("8 timings: create to first result (5 fresh sandboxes), run_code 1+1 (50 after 5 warm-ups)", () =>
  measure(timings),
);

const total = round(performance.now() - started);
console.log(`${passed} steps passed, ${failures} failed, ${total} ms`);
console.log(`JSON:${JSON.stringify(timings)}`);
process.exitCode = failures === 0 ? 0 : 1;

// ---------------------------------------------------------------------------------------
async function scenario(sbx) {
  const id = sbx.sandboxId;

  // 2. A cell with live output, the sandbox's env var and a final value.
  await step("2 runCode: onStdout/onStderr live, envs from create, text '42', logs", async () => {
    const out = [];
    const err = [];
    const ex = await cell(sbx, "import os, sys\nprint('hello', os.environ['FOO'])\nprint('warn', file=sys.stderr)\n21 * 2", {
      onStdout: (m) => out.push(m),
      onStderr: (m) => err.push(m),
    });
    assert.equal(out.map((m) => m.line).join(""), "hello bar\n");
    assert.equal(err.map((m) => m.line).join(""), "warn\n");
    assert.ok(out.every((m) => m.error === false && typeof m.timestamp === "number"));
    assert.ok(err.every((m) => m.error === true));
    assert.equal(ex.text, "42");
    assert.deepEqual(ex.logs, { stdout: ["hello bar\n"], stderr: ["warn\n"] });
    assert.equal(ex.results.length, 1);
    assert.equal(ex.results[0].isMainResult, true);
  });

  // 3. Ten use cases of a code interpreter.
  await step("3.1 state kept across cells: x = 5, then x * 2 is '10'", async () => {
    const a = await cell(sbx, "x = 5");
    assert.equal(a.text, undefined);
    assert.deepEqual(a.results, []);
    const b = await cell(sbx, "x * 2");
    assert.equal(b.text, "10");
  });

  await step("3.2 pandas DataFrame as the last value: an html <table> and a text form", async () => {
    const ex = await cell(sbx, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\ndf");
    assert.equal(ex.results.length, 1);
    const r = ex.results[0];
    assert.ok(r.html?.includes("<table"), `html: ${r.html}`);
    assert.ok(r.text?.includes("a") && r.text.includes("b"), `text: ${r.text}`);
    assert.ok(r.formats().includes("html"), `formats: ${r.formats()}`);
  });

  await step("3.3 matplotlib plt.show(): a png result (base64 of a PNG), seen by onResult too", async () => {
    const seen = [];
    const ex = await cell(
      sbx,
      "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()",
      { onResult: (r) => seen.push(r) },
    );
    const png = ex.results.find((r) => r.png);
    assert.ok(png, `no png among ${JSON.stringify(ex.results.map((r) => r.formats()))}`);
    const bytes = Buffer.from(png.png, "base64");
    assert.ok(bytes.length > 100, `png of ${bytes.length} bytes`);
    assert.deepEqual(bytes.subarray(0, 8), PNG_MAGIC);
    assert.ok(seen.some((r) => r.png === png.png), "onResult did not see the png");
  });

  await step("3.4 an error: 1/0 is ZeroDivisionError 'division by zero' with its traceback", async () => {
    const errors = [];
    const ex = await sbx.runCode("1/0", { onError: (e) => errors.push(e) });
    assert.ok(ex.error, "no error");
    assert.equal(ex.error.name, "ZeroDivisionError");
    assert.equal(ex.error.value, "division by zero");
    assert.ok(ex.error.traceback.includes("ZeroDivisionError"), ex.error.traceback);
    assert.equal(errors.length, 1);
    assert.equal(errors[0].name, "ZeroDivisionError");
    assert.equal(ex.text, undefined);
  });

  await step("3.5 numpy: an array computed and returned", async () => {
    const ex = await cell(sbx, "import numpy as np\na = np.arange(10).reshape(2, 5)\na.sum(axis=1).tolist()");
    assert.equal(ex.text, "[10, 35]");
  });

  await step("3.6 a print loop: each line in order, in logs.stdout", async () => {
    const ex = await cell(sbx, "for i in range(5):\n    print('line', i)");
    assert.equal(ex.logs.stdout.join(""), "line 0\nline 1\nline 2\nline 3\nline 4\n");
    assert.deepEqual(ex.logs.stderr, []);
    assert.deepEqual(ex.results, []);
  });

  await step("3.7 unicode: 'héllo ✓' printed and returned intact", async () => {
    const ex = await cell(sbx, "s = 'héllo ✓'\nprint(s)\ns");
    assert.equal(ex.logs.stdout.join(""), "héllo ✓\n");
    assert.equal(ex.text, "'héllo ✓'");
  });

  await step("3.8 a file written by files.write read by a cell (relative to /home/user)", async () => {
    await sbx.files.write("note.txt", "written by files.write\n");
    const ex = await cell(sbx, "import os\nprint(os.getcwd())\nopen('note.txt').read()");
    assert.equal(ex.logs.stdout.join(""), `${HOME}\n`);
    assert.equal(ex.text, "'written by files.write\\n'");
  });

  await step("3.9 display() of text: a result that is not the main one, before the main one", async () => {
    const ex = await cell(sbx, "display('shown first')\n'last value'");
    assert.equal(ex.results.length, 2, JSON.stringify(ex.results));
    // Vivarium's display() shows a str as its text (docs/guides/rich-outputs.md); the final value is its repr.
    assert.equal(ex.results[0].text, 'shown first');
    assert.equal(ex.results[0].isMainResult, false);
    assert.equal(ex.results[1].text, "'last value'");
    assert.equal(ex.results[1].isMainResult, true);
    assert.equal(ex.text, "'last value'");
  });

  await step("3.10 runCode envs: a per-cell env var, the sandbox's kept", async () => {
    const ex = await cell(sbx, "import os\n(os.environ.get('CELL_ONLY'), os.environ['FOO'])", {
      envs: { CELL_ONLY: "yes" },
    });
    assert.equal(ex.text, "('yes', 'bar')");
  });

  // 4. Contexts.
  await step("4 contexts: create, run in it, isolated from the default, listed, removed", async () => {
    const ctx = await sbx.createCodeContext();
    assert.equal(typeof ctx.id, "string");
    assert.equal(ctx.language, "python");
    await cell(sbx, "y = 1", { context: ctx });
    const inCtx = await cell(sbx, "y", { context: ctx });
    assert.equal(inCtx.text, "1");
    const inDefault = await sbx.runCode("y");
    assert.equal(inDefault.error?.name, "NameError", JSON.stringify(inDefault.error));
    const listed = await sbx.listCodeContexts();
    assert.ok(
      listed.some((c) => c.id === ctx.id),
      `${ctx.id} not in ${JSON.stringify(listed)}`,
    );
    await sbx.removeCodeContext(ctx);
    const after = await sbx.listCodeContexts();
    assert.ok(!after.some((c) => c.id === ctx.id), `${ctx.id} still in ${JSON.stringify(after)}`);
  });

  // 5. Files.
  const csv = "a,b\n1,2\n";
  await step("5.1 files.write one file (relative) and an array of two (absolute, one in a new dir)", async () => {
    const info = await sbx.files.write("data.csv", csv);
    assert.equal(info.name, "data.csv");
    assert.equal(info.path, `${HOME}/data.csv`);
    const infos = await sbx.files.write([
      { path: `${HOME}/one.txt`, data: "1" },
      { path: `${HOME}/dir/two.txt`, data: "2" },
    ]);
    assert.equal(infos.length, 2);
    assert.deepEqual(
      infos.map((i) => i.path),
      [`${HOME}/one.txt`, `${HOME}/dir/two.txt`],
    );
  });

  await step("5.2 files.read as text and as bytes", async () => {
    assert.equal(await sbx.files.read("data.csv"), csv);
    const bytes = await sbx.files.read("one.txt", { format: "bytes" });
    assert.ok(bytes instanceof Uint8Array);
    assert.deepEqual(Array.from(bytes), [0x31]);
    assert.equal(await sbx.files.read(`${HOME}/dir/two.txt`), "2");
  });

  await step("5.3 files.list /home/user: data.csv, one.txt (file) and dir (dir)", async () => {
    const entries = await sbx.files.list(HOME);
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
    for (const n of ["data.csv", "one.txt", "dir"]) assert.ok(byName[n], `${n} not in ${Object.keys(byName)}`);
    assert.equal(byName["dir"].type, "dir");
    assert.equal(byName["one.txt"].type, "file");
    assert.equal(byName["data.csv"].path, `${HOME}/data.csv`);
  });

  await step("5.4 files.exists and files.getInfo", async () => {
    assert.equal(await sbx.files.exists("data.csv"), true);
    assert.equal(await sbx.files.exists(`${HOME}/dir`), true);
    assert.equal(await sbx.files.exists("no-such-file.txt"), false);
    const info = await sbx.files.getInfo("data.csv");
    assert.equal(info.name, "data.csv");
    assert.equal(info.type, "file");
    assert.equal(info.path, `${HOME}/data.csv`);
    assert.equal(info.size, csv.length);
  });

  await step("5.5 files.makeDir: true, then false when it exists", async () => {
    assert.equal(await sbx.files.makeDir("made"), true);
    assert.equal(await sbx.files.makeDir("made"), false);
    assert.equal((await sbx.files.getInfo("made")).type, "dir");
  });

  await step("5.6 files.rename moves a file; the old name is gone", async () => {
    const info = await sbx.files.rename("one.txt", "uno.txt");
    assert.equal(info.path, `${HOME}/uno.txt`);
    assert.equal(await sbx.files.exists("one.txt"), false);
    assert.equal(await sbx.files.read("uno.txt"), "1");
  });

  await step("5.7 files.remove, then exists is false", async () => {
    await sbx.files.remove("uno.txt");
    assert.equal(await sbx.files.exists("uno.txt"), false);
  });

  await step("5.8 reading a missing file rejects with NotFoundError (FileNotFoundError)", async () => {
    await rejectsWith(sbx.files.read("missing.txt"), NotFoundError, (e) => {
      assert.equal(e.name, "FileNotFoundError");
    });
  });

  // 6. Commands.
  await step("6.1 commands.run python -c: stdout '42\\n', exit 0, onStdout live", async () => {
    const live = [];
    const r = await sbx.commands.run('python -c "print(40 + 2)"', { onStdout: (d) => live.push(d) });
    assert.equal(r.stdout, "42\n");
    assert.equal(r.stderr, "");
    assert.equal(r.exitCode, 0);
    assert.equal(live.join(""), "42\n");
  });

  await step("6.2 commands.run python script.py a b: a file written, run with its argv", async () => {
    await sbx.files.write("script.py", "import sys\nprint(sys.argv)\n");
    const r = await sbx.commands.run("python script.py a b");
    assert.equal(r.stdout, "['script.py', 'a', 'b']\n");
    assert.equal(r.exitCode, 0);
  });

  await step("6.3 sys.exit(3) rejects with CommandExitError, exitCode 3", async () => {
    await rejectsWith(sbx.commands.run('python -c "import sys; sys.exit(3)"'), CommandExitError, (e) => {
      assert.equal(e.exitCode, 3);
    });
  });

  await step("6.4 a command not found rejects with CommandExitError 127, stderr says 'not found'", async () => {
    await rejectsWith(sbx.commands.run("nosuch -la"), CommandExitError, (e) => {
      assert.equal(e.exitCode, 127);
      assert.ok(e.stderr.includes("nosuch: command not found"), e.stderr);
    });
  });

  await step("6.5 a pipe (echo hi | cat) runs in the sandbox's shell: 'hi\\n', exit 0", async () => {
    const r = await sbx.commands.run("echo hi | cat");
    assert.equal(r.stdout, "hi\n");
    assert.equal(r.exitCode, 0);
  });

  // 7. Lifecycle.
  await step("7.1 setTimeout(60000)", async () => {
    await sbx.setTimeout(60_000);
  });

  await step("7.2 getInfo: running, metadata.suite 'js'", async () => {
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, id);
    assert.equal(info.state, "running");
    assert.equal(info.metadata?.suite, "js");
    assert.ok(info.endAt instanceof Date && !Number.isNaN(info.endAt.getTime()), `endAt ${info.endAt}`);
  });

  await step("7.3 Sandbox.list() paginator: nextItems() includes this sandbox", async () => {
    const paginator = Sandbox.list();
    const ids = [];
    do {
      const items = await paginator.nextItems();
      ids.push(...items.map((s) => s.sandboxId));
    } while (paginator.hasNext);
    assert.ok(ids.includes(id), `${id} not in ${JSON.stringify(ids)}`);
  });

  await step("7.4 Sandbox.connect(id), then runCode on the connected object", async () => {
    const again = await Sandbox.connect(id);
    assert.equal(again.sandboxId, id);
    const ex = await cell(again, "x + 1");
    assert.equal(ex.text, "6");
  });

  await step("7.5 pause() is true, getInfo says paused", async () => {
    const paused = typeof sbx.pause === "function" ? await sbx.pause() : await sbx.betaPause();
    assert.equal(paused, true);
    const info = await sbx.getInfo();
    assert.equal(info.state, "paused");
  });

  await step("7.6 Sandbox.connect(id) resumes; x from step 3 is still 5", async () => {
    const resumed = await Sandbox.connect(id);
    const ex = await cell(resumed, "x");
    assert.equal(ex.text, "5");
    assert.equal((await sbx.getInfo()).state, "running");
  });

  await step("7.7 isRunning true; kill() true; isRunning false; Sandbox.kill(id) false", async () => {
    assert.equal(await sbx.isRunning(), true);
    assert.equal(await sbx.kill(), true);
    assert.equal(await sbx.isRunning(), false);
    assert.equal(await Sandbox.kill(id), false);
  });
}

// ---------------------------------------------------------------------------------------
async function measure(timings) {
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const s = await Sandbox.create({ timeoutMs: 60_000 });
    try {
      const ex = await s.runCode("1+1");
      timings.create_to_first_result_ms.push(round(performance.now() - t0));
      assert.equal(ex.text, "2");
    } finally {
      await s.kill();
    }
  }
  const s = await Sandbox.create({ timeoutMs: 60_000 });
  try {
    for (let i = 0; i < 5; i++) assert.equal((await s.runCode("1+1")).text, "2");
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      const ex = await s.runCode("1+1");
      timings.run_code_ms.push(round(performance.now() - t0));
      assert.equal(ex.text, "2");
    }
  } finally {
    await s.kill();
  }
}

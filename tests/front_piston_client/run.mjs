// Calls Vivarium's Piston v2 API through the published `piston-client` package, exactly as an
// existing Piston user would, and prints every answer as one JSON object on stdout.
// Usage: node run.mjs http://127.0.0.1:PORT
import piston from "piston-client";

const server = process.argv[2];
const client = piston({ server });

const out = {};
out.runtimes = await client.runtimes();
// The shortest form: language and code; the client picks the latest version itself.
out.hello = await client.execute("python", 'print("hello from piston")');
// Several files (the first is the program), stdin, args.
out.files = await client.execute({
  language: "python",
  version: "3.15.0",
  files: [
    {
      name: "main.py",
      content: "import sys\nprint(open('data.txt').read().strip(), sys.argv, input())\nprint('warn', file=sys.stderr)",
    },
    { name: "data.txt", content: "DATA" },
  ],
  stdin: "typed line\n",
  args: ["a", "b"],
});
out.error = await client.execute("python", "x = 1\n1/0\n");
out.timeout = await client.execute("python", "while True:\n    pass\n", { runTimeout: 300 });
out.unknown = await client.execute("cobol", "DISPLAY 'HI'.", { version: "1.0.0" });
console.log(JSON.stringify(out));

#!/usr/bin/env python3
"""Direct checks of vivarium_shell_files against the machine's GNU tools (issue 49, H4).

Every case runs twice in a fresh copy of the same fixture tree, at the same path: with
`LC_ALL=C TZ=UTC bash -c` (GNU coreutils, findutils, tar, gzip, Info-ZIP, file 5.44) and with
the guest shell under the host's python3 (run_host.py). Compared byte for byte: stdout, the
exit status, and the tree the command leaves behind (names, types, sizes, link targets,
permission bits and the contents of files; archives only by name, their bytes hold times and
another deflate). `python3 tests/shell/test_files.py [substring...]`; exit 1 on a mismatch.

`--guest BINARY` runs the shell side inside the real runtime instead (`BINARY run`, one
sandbox for all cases, the guest modules of this working tree loaded under their guest
names): what differs there is the sandbox's own filesystem (no permission bits, no owners,
directory sizes), and is reported, not failed.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_HOST = os.path.join(HERE, "run_host.py")
OLD = 1705314600  # 2024-01-15 10:30 UTC: older than six months, so ls shows the year
ARCHIVES = (".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".tbz")

CASES = r"""
# --- ls
ls
ls -a
ls -A
ls -l
ls -la d
ls -l l d a
ls -R
ls a nonexist d; echo $?
ls -F
ls -lF
ls -lh
ls -1 -S
ls -t
ls -rt
ls -d d e
ls -ld d
ls -s
ls -ls
ls -lR d
ls d/ e/
ls -la --full-time a
ls -p
ls -lrS
ls -m
ls -x
ls -C
ls -C -w 30 d
ls -n d
ls -lg d
ls -o d
ls -l -1
ls --foo; echo $?
ls -lU d
ls -i a | cut -c1-1
ls -l --time-style=long-iso a
ls *.txt
ls -d */
ls -1 | wc -l
# --- find
find
find . -name "*.txt"
find . -type d
find . -type f -name "*.sh"
find . -maxdepth 1 | sort
find . -mindepth 2 | sort
find . -type l
find . -empty | sort
find . -size +1k
find . -size -1k | sort
find . -name "*.txt" -o -name "*.sh" | sort
find . \( -name "*.txt" -o -name "*.sh" \) -print | sort
find . ! -type f | sort
find . -not -name "*.*" | sort
find . -path "./d/*" | sort
find d -exec echo {} \; | sort
find d -type f -exec cat {} + | sort
find d -print0 | tr '\0' '\n' | sort
find d -printf "%p %f %h %s %d %y %P %m\n" | sort
find nonexist; echo $?
find . -foo; echo $?
find . -name; echo $?
find . -name x y; echo $?
find . -name d -prune -o -print | sort
find . -newer a.txt | sort
find . -iname "A*" | sort
find d/ -name "*" | sort
find . -regex ".*\.\(txt\|sh\)" | sort
find -name a.txt
find d -depth | sort
find . -quit
find . -name "[a-c]*" -type f | sort
find . -type d -empty -delete; find . | sort
find . -name "*.txt" -delete; ls
find d -type f -execdir echo {} \; | sort
find . -type f -size -2c | sort
find . -links 1 -type f -name "a*"
find . -user root -name a.txt
find . -perm 644 -name a.txt
find . -o; echo $?
find . \( -name a; echo $?
# --- stat du
stat -c "%n|%s|%F|%a|%A|%h|%u|%g" a.txt d l
stat -c "%N" l a.txt
stat -c "%Y %y" a.txt
stat --printf "%n\t%s\n" a.txt b.sh
stat nonexist; echo $?
stat -L -c %F l
stat -c %s empty
stat
du -a | sort
du -s
du -sh d
du -h | sort
du -c a.txt d
du -b d
du --apparent-size d
du --max-depth=1 | sort
du -sk a.txt
du nonexist; echo $?
du -sb d
du -S | sort
# --- mkdir rm touch ln
mkdir n; ls -d n
mkdir -p n/m/o; find n
mkdir -pv n/m/o
mkdir -v q r
mkdir a.txt; echo $?
mkdir d; echo $?
mkdir -p a.txt/x; echo $?
mkdir x/y; echo $?
mkdir; echo $?
mkdir -m 700 priv; stat -c %a priv
rm a.txt; ls
rm d; echo $?
rm -r d; ls
rm -rv d
rm -f nope; echo $?
rm nope; echo $?
rm -d e; ls
rm -d d; echo $?
rm -rf .; echo $?
rm -r d/..; echo $?
rm; echo $?
rm -f; echo $?
rm -v l ld
rm -r ld/; ls
rm -rv d a.txt b.sh
touch a.txt new; ls
touch -c nope; ls
touch -d "2020-01-01 00:00" a.txt; ls -l --full-time a.txt
touch -t 202001011200.30 a.txt; stat -c %Y a.txt
touch -r a.txt new2; stat -c %Y new2
touch x/y; echo $?
touch -m -d @5 a.txt; stat -c %Y a.txt
ln -s a.txt sl; ls -l sl
ln -s a.txt d; ls -l d/a.txt
ln a.txt h; stat -c %h a.txt
ln -s a.txt b.sh; echo $?
ln -sf a.txt b.sh; readlink b.sh
ln -sv a.txt b2
ln -v a.txt h2
ln d dd; echo $?
ln nope z; echo $?
ln -sfn e ld; readlink ld
ln -s a.txt b.sh d; echo $?
ln -sr a.txt d/sub/rel; readlink d/sub/rel
# --- cp mv
cp a.txt c; cat c
cp a.txt d; ls d
cp a.txt b.sh d; ls d
cp d x; echo $?
cp -r d x; find x | sort
cp -r d e; find e | sort
cp -v a.txt c
cp a.txt a.txt; echo $?
cp nope x; echo $?
cp; echo $?
cp a.txt; echo $?
cp a.txt b.sh c; echo $?
cp -n a.txt b.sh; cat b.sh
cp l c; ls -l c | cut -c1
cp -a d x; find x | sort
cp -p a.txt c; stat -c %Y c
cp a.txt nodir/; echo $?
cp a.txt x/y; echo $?
cp -r d/ e/; find e | sort
cp -t d a.txt b.sh; ls d
cp -rT d e; find e | sort
cp -R ld x; ls -l x | cut -c1
cp a.txt empty; cat empty
mv a.txt c; ls
mv a.txt d; ls d
mv -v a.txt b.sh
mv d e; find e | sort
mv nope x; echo $?
mv a.txt a.txt; echo $?
mv d d/sub; echo $?
mv a.txt e/ b.sh; echo $?
mv -n a.txt b.sh; cat b.sh
mv e a.txt; echo $?
mv; echo $?
mv a.txt; echo $?
mv d/sub .; ls
mv -t e a.txt b.sh; ls e
# --- basename dirname realpath readlink
basename /a/b/c.txt .txt
basename -a x/y z/
basename -s .c a.c b.c
basename; echo $?
basename a b c; echo $?
basename //a//
dirname a/b/ /x // a ///a/b//
dirname; echo $?
realpath a.txt l ld/sub nonexist
realpath nonexist/x; echo $?
realpath -e nonexist; echo $?
realpath -m nonexist/../q
realpath -s ld/x
realpath --relative-to=d d/sub/y a.txt
realpath .
readlink l
readlink a.txt; echo $?
readlink -f l
readlink -f ld/x/y
readlink -e nope; echo $?
readlink -m x/../y
# --- other file commands
rmdir e; ls
rmdir d; echo $?
mkdir -p p/q/r; rmdir -pv p/q/r
unlink a.txt; ls
chmod +x a.txt; stat -c %a a.txt
chmod -R go-w d; stat -c %a d d/x
chmod u=rwx,g=rx,o= a.txt; stat -c %a a.txt
chmod xyz a.txt; echo $?
chmod -v 600 a.txt
truncate -s 2 a.txt; cat a.txt
truncate -s +5 b.sh; stat -c %s b.sh
mktemp -p . tmpXXXXXX | wc -c
# --- file
file *
file -b a.txt
file -i a.txt d data.csv
file --mime-type a.txt
file nonexist; echo $?
file -L l
# --- gzip
gzip a.txt; ls; file a.txt.gz | cut -d, -f1,2
gzip -k a.txt; gzip -l a.txt.gz
gzip a.txt; gunzip a.txt.gz; cat a.txt
gzip a.txt b.sh; gzip -l a.txt.gz b.sh.gz
gzip d; echo $?
gzip nope; echo $?
gzip -k a.txt; gzip a.txt; echo $?
gzip -k a.txt; gzip a.txt.gz; echo $?
gunzip b.sh; echo $?
gzip -r d; find d | sort
gzip -k a.txt; gunzip -c a.txt.gz
gzip -k a.txt; zcat a.txt.gz
gzip -k a.txt; gzip -t a.txt.gz; echo $?
gzip -c a.txt | gunzip
gzip -c a.txt b.sh | gzip -dc
echo hello | gzip | gzip -d
gzip -k a.txt; gzip -dk a.txt.gz; echo $?
gzip -k a.txt; gzip -dkf a.txt.gz; cat a.txt
gzip -k a.txt; mv a.txt.gz x.tgz; gunzip x.tgz; ls
# --- tar
tar cf x.tar a.txt d; tar tf x.tar
tar cvf x.tar a.txt d
tar czf x.tgz d a.txt l; tar tzf x.tgz
tar -czf x.tgz d; tar -tvzf x.tgz | cut -c1-10,30-
tar cf x.tar d; rm -r d; tar xf x.tar; find d | sort
tar cf x.tar d; rm -r d; tar xvf x.tar
tar cf x.tar d; mkdir o; tar xf x.tar -C o; find o | sort
tar cf x.tar nope a.txt; echo $?
tar tf nope.tar; echo $?
tar cf x.tar; echo $?
tar -cf x.tar -C d . ; tar tf x.tar
tar cf x.tar d a.txt; tar tf x.tar d
tar cf x.tar d a.txt; tar tf x.tar zz; echo $?
tar cf x.tar d; tar xOf x.tar d/x
tar cf x.tar d; tar xf x.tar --strip-components=1; find sub x | sort
tar cf x.tar --exclude=x d; tar tf x.tar
tar cf - a.txt | tar tf -
tar czf - d | tar xzf - -C e; find e | sort
tar cjf x.tbz a.txt; tar tjf x.tbz; tar tf x.tbz
tar -caf x.tar.xz a.txt; tar tf x.tar.xz
tar cf x.tar a.txt; tar rf x.tar b.sh; tar tf x.tar
tar -x; echo $?
# --- zip unzip
zip -r z.zip a.txt d l
zip z a.txt; ls
zip -r z.zip a.txt nope
zip q.zip nope; echo $?
zip -j j.zip d/x d/sub/y
zip d.zip d
zip -q q.zip a.txt; echo $?
zip -r z.zip a.txt d; zip -d z.zip a.txt; unzip -l z.zip | cut -c1-9,30-
zip -r z.zip d; mkdir o; cd o; unzip ../z.zip
zip -r z.zip d; rm -r d; unzip z.zip; find d | sort
zip -r z.zip d a.txt; unzip -o z.zip
zip -r z.zip d a.txt; unzip -o z.zip d/x
zip z.zip a.txt; unzip z.zip nope; echo $?
zip -r z.zip d; unzip -d out z.zip
zip -r z.zip d; unzip -t z.zip
zip z.zip a.txt; unzip -p z.zip a.txt
zip -r z.zip d; unzip -q z.zip -d q; find q | sort
unzip nope; echo $?
zip -y yl.zip l a.txt; mkdir o2; cd o2; unzip ../yl.zip
zip -r z.zip d a.txt; unzip -v z.zip | cut -c1-17,48-
zip -r z.zip d; zip -r z.zip d
unzip a.txt; echo $?
zip -r z.zip d; unzip -j z.zip; ls
zip -r z.zip d; unzip -l z.zip "d/sub/*" | cut -c1-9,30-
zip -r z.zip d; unzip z.zip -x d/x
zip -r z.zip d a.txt; file z.zip
# --- date
date -d @0
date -u -d @1700000000
date -d "2024-01-15" +%s
date -d "2024-01-15 10:30:00" +%s
date -d "2024-02-29T12:00:00Z"
date -Iseconds -d @1700000000
date -R -d @1700000000
date --rfc-3339=seconds -d @1700000000
date -d "2023-06-01 +3 days" +%F
date -d "Jan 5 2023" +%F
date -d "5 Jan 2023" +%F
date -d "12/25/2023" +%F
date -d garbage; echo $?
date -d @86399 "+%A %B %h %c %D %x %X %r %R %T %j %U %W %V %G %u %w %C %y %p %P %I %l %k"
date -d @1700000000.123456789 +%N/%3N/%-d/%_m/%e
date -d "2024-03-10 14:00 +0200" -u
date -d "20240102" +%F
date -r a.txt +%s
"""


def fixture(d):
    def w(name, data, mode=0o644):
        p = os.path.join(d, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)

    w("a.txt", b"hello\n")
    w("b.sh", b"#!/bin/sh\necho hi\n", 0o755)
    w("data.csv", b"name,age\nbob,30\nalice,25\ncarol,35\n")
    w("cfg.json", b'{"a": [1, 2], "b": null}\n')
    w("big.txt", b"".join(b"line %d\n" % i for i in range(400)))
    w("empty", b"")
    w("d/x", b"x\n")
    w("d/sub/y", b"y\n")
    w("d/sub/z.txt", b"zzz\n")
    os.makedirs(os.path.join(d, "e"))
    os.symlink("a.txt", os.path.join(d, "l"))
    os.symlink("d", os.path.join(d, "ld"))
    for root, dirs, files in os.walk(d, topdown=False):
        for n in files + dirs:
            os.utime(os.path.join(root, n), (OLD, OLD), follow_symlinks=False)
    os.utime(d, (OLD, OLD))


def tree(d, modes=None):
    if modes is None:
        modes = sys.platform != "wasi"  # the sandbox has no permission bits
    out = []
    for root, dirs, files in os.walk(d):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, d)
            st = os.lstat(p)
            if os.path.islink(p):
                out.append(f"{rel} -> {os.readlink(p)}")
            elif os.path.isdir(p):
                out.append(f"{rel}/ {st.st_mode & 0o7777:o}" if modes else f"{rel}/")
            elif n.endswith(ARCHIVES):
                out.append(f"{rel} (archive)")
            elif rel.startswith("tmp"):
                out.append("tmp* (mktemp)")
            else:
                with open(p, "rb") as f:
                    h = hashlib.md5(f.read()).hexdigest()[:12]
                out.append(f"{rel} {st.st_size} {st.st_mode & 0o7777:o} {h}" if modes else
                           f"{rel} {st.st_size} {h}")
    return "\n".join(out)


def run(case, shell, base, modes=True):
    w = os.path.join(base, "w")
    if os.path.lexists(w):
        shutil.rmtree(w)
    os.mkdir(w)
    fixture(w)
    env = dict(os.environ, LC_ALL="C", TZ="UTC", HOME=w)
    argv = ["bash", "-c", case] if shell == "bash" else [sys.executable, RUN_HOST, "-c", case]
    p = subprocess.run(argv, cwd=w, capture_output=True, env=env, stdin=subprocess.DEVNULL,
                       timeout=60)
    return p.stdout, p.returncode, tree(w, modes), p.stderr


GUEST_MAIN = r"""
import hashlib, importlib.util, json, os, shutil, sys
for name, f in [("vivarium_shell_text", "shell_text.py"), ("vivarium_shell_lang", "shell_lang.py"),
                ("vivarium_shell_files", "shell_files.py"), ("vivarium_shell", "shell.py")]:
    spec = importlib.util.spec_from_file_location(name, "/guest/" + f)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
sh = sys.modules["vivarium_shell"]
cases = json.load(open("/guest/cases.json"))
results = []
for case in cases:
    w = "/tmp/w"
    os.chdir("/")
    if os.path.lexists(w):
        shutil.rmtree(w)
    os.makedirs(w)
    fixture(w)
    os.chdir(w)
    os.environ.update(LC_ALL="C", TZ="UTC", HOME=w)
    status, out = sh.run_capture(case)
    os.chdir("/")
    results.append([out.decode("utf-8", "surrogateescape"), status, tree(w)])
print("@@RESULTS@@" + json.dumps(results))
"""


def guest(cases, binary):
    import inspect
    import json

    guest_dir = os.path.normpath(os.path.join(HERE, "..", "..", "python-wasi", "guest"))
    with tempfile.TemporaryDirectory() as t:
        with open(os.path.join(t, "cases.json"), "w") as f:
            json.dump(cases, f)
        prog = ("ARCHIVES = %r\nOLD = %d\n" % (ARCHIVES, OLD) + inspect.getsource(fixture)
                + inspect.getsource(tree) + GUEST_MAIN)
        with open(os.path.join(t, "main.py"), "w") as f:
            f.write("import hashlib, os, sys\n" + prog)
        argv = [binary, "run", "--timeout-ms", "600000", "--file", "guest/cases.json=" +
                os.path.join(t, "cases.json")]
        for f in ("shell.py", "shell_text.py", "shell_lang.py", "shell_files.py"):
            argv += ["--file", f"guest/{f}=" + os.path.join(guest_dir, f)]
        argv.append(os.path.join(t, "main.py"))
        p = subprocess.run(argv, capture_output=True, timeout=900)
    text = p.stdout.decode("utf-8", "surrogateescape")
    if "@@RESULTS@@" not in text:
        sys.stderr.write(text[-2000:] + p.stderr.decode("utf-8", "replace")[-2000:])
        raise SystemExit(2)
    res = json.loads(text.split("@@RESULTS@@", 1)[1])
    return [(o.encode("utf-8", "surrogateescape"), st, tr, b"") for o, st, tr in res]


def main():
    only = sys.argv[1:]
    binary = None
    if "--guest" in only:
        i = only.index("--guest")
        binary = only[i + 1]
        only = only[:i] + only[i + 2:]
    cases = [c for c in CASES.split("\n") if c.strip() and not c.startswith("#")]
    if only:
        cases = [c for c in cases if any(o in c for o in only)]
    import concurrent.futures

    def both(case):
        with tempfile.TemporaryDirectory() as base:
            return run(case, "bash", base), run(case, "shell", base)

    bad = 0
    jobs = int(os.environ.get("JOBS", "4"))
    if binary is None:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(both, cases))
    else:
        def bash_at(case):
            base = "/tmp"
            d = tempfile.mkdtemp()
            try:
                a = run(case, "bash", d, modes=False)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            # the guest's fixture lives at /tmp/w
            return (a[0].replace(os.path.join(d, "w").encode(), b"/tmp/w"), a[1], a[2], a[3])

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            host = list(pool.map(bash_at, cases))
        results = list(zip(host, guest(cases, binary)))
    import difflib

    for case, (a, b) in zip(cases, results):
        if a[:3] != b[:3]:
            bad += 1
            print(f"MISMATCH: {case}")
            if a[1] != b[1]:
                print(f"  status: bash {a[1]}, shell {b[1]}")
            if a[0] != b[0]:
                for line in list(difflib.unified_diff(
                        a[0].decode("utf-8", "replace").splitlines(),
                        b[0].decode("utf-8", "replace").splitlines(), "bash", "shell",
                        lineterm=""))[2:30]:
                    print("  " + line)
            if a[2] != b[2]:
                print("  tree differs:")
                for line in list(difflib.unified_diff(a[2].splitlines(), b[2].splitlines(),
                                                      "bash", "shell", lineterm=""))[2:20]:
                    print("  " + line)
            if b[3]:
                print("  shell stderr: " + b[3].decode("utf-8", "replace")[-400:])
    print(f"{len(cases) - bad}/{len(cases)} cases match" + (" (in the guest)" if binary else ""))
    return 1 if bad and binary is None else 0


if __name__ == "__main__":
    sys.exit(main())

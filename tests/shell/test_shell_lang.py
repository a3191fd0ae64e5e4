#!/usr/bin/env python3
"""The guest shell's language against the machine's bash (issue 49): each case runs in a fresh
temporary directory with the same fixture files, under bash (LC_ALL=C) and under
vivarium_shell in this process (host python3); stdout and the exit status must match.

    python3 tests/shell/test_shell_lang.py [-v] [-k SUBSTRING]
    python3 tests/shell/test_shell_lang.py --guest target/debug/vivarium [-k SUBSTRING]
        # the same cases through the guest's CPython 3.15 (`vivarium run`, one sandbox for
        # all, the guest modules copied in from python-wasi/guest/)

Exits 1 when a case differs. Cases are one line each; a line ending in a backslash, or a
here-document, continues on the next lines. Mostly the shell's own language and builtins
(echo, printf, test, read, ...), with cat/head/tr/wc/grep/sed where their modules exist.
"""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_host  # noqa: E402

CASES = r"""
echo hello world
echo "a  b" 'c  d' e\ f
echo -n x; echo y
echo -e 'a\tb\nc'
echo -e 'a\c' b
echo -E 'a\tb'
printf '%s-%s\n' a b c d e
printf '%5d|%-5s|%05.1f|%x|%o|%X\n' 42 ab 3.14159 255 8 255
printf '%c%c\n' hello world
printf '%b\n' 'a\tb' 'x\ny'
printf '%q\n' "a b" "it's" ''
printf 'no newline'
printf '%3s|%-3s|%.2s\n' a b abcdef
printf '%d\n' 0x1f 010 "'A"
printf '%e %g %G\n' 12345.678 0.0001 1e20
printf '%%\n'
printf -v v '%s,' a b; echo "$v"
printf '%d\n' abc; echo $?
x=5; echo $x ${x} "$x" '$x'
x=hello; echo ${#x} ${x:1} ${x:1:3} ${x: -2} ${x:0:-1}
x=hello.tar.gz; echo ${x%.*} ${x%%.*} ${x#*.} ${x##*.}
x=aXbXc; echo ${x/X/-} ${x//X/-} ${x/#a/A} ${x/%c/C}
x=hello; echo ${x^} ${x^^} ${x,,}
unset y; echo ${y:-def} ${y-def2} "${y:+alt}" end
y=; echo ${y:-def} ${y-def2} "${y:+alt}" end
y=val; echo ${y:-def} ${y:+alt}
echo ${z:=assigned}; echo $z
a=1; b=2; echo $((a + b * 3)) $(( (a+b)*3 )) $((10 / 3)) $((-7 / 2)) $((-7 % 3)) $((2**10))
echo $((1 << 4)) $((255 & 15)) $((1 | 6)) $((5 ^ 1)) $((!0)) $((~0)) $((3 > 2 && 1 < 0))
i=0; echo $((i++)) $((i++)) $((++i)) $i; ((i += 5)); echo $i
echo $((0x10 + 010 + 2#101)) $(( 1 ? 2 : 3 )) $(( 0 ? 2 : 3 ))
x=3; (( x > 2 )) && echo big; (( x > 5 )) || echo small
echo $(echo inner) `echo back` "$(echo "nested $(echo deep)")"
x=$(printf 'a\n\n\n'); echo "[$x]"
echo one; echo two >&2; echo three
echo out > f; cat f; echo more >> f; cat f
cat <<EOF
line $HOME_NOT_SET one
  two \$x $((1+1))
EOF
cat <<'EOF'
raw $x `cmd` \n
EOF
cat <<-EOF
	tabbed
	EOF
x=1; cat <<EOF | tr a-z A-Z
value $x
EOF
tr a-z A-Z <<< "here string"
read a b <<< "one two three"; echo "$a|$b"
read -r line <<< 'back\slash'; echo "$line"
read line <<< 'back\slash'; echo "$line"
IFS=: read a b c <<< "x:y:z:w"; echo "$a $b $c"
printf 'l1\nl2\nl3' | while read l; do echo "got $l"; done
printf 'a b\nc d\n' | while read x y; do echo "$y $x"; done
while read -r l; do echo "[$l]"; done < a.txt
if true; then echo yes; else echo no; fi
if false; then echo yes; elif true; then echo elif; else echo no; fi
for i in a b c; do echo $i; done
for i in 1 2 3 4 5; do if [ $i = 3 ]; then continue; fi; if [ $i = 5 ]; then break; fi; echo $i; done
for ((i=0; i<3; i++)); do echo i=$i; done
n=0; while [ $n -lt 3 ]; do n=$((n+1)); echo $n; done
n=0; until [ $n -ge 2 ]; do n=$((n+1)); done; echo $n
for i in 1 2; do for j in a b; do if [ $j = b ]; then continue 2; fi; echo $i$j; done; done
for f in *.txt; do echo "file $f"; done
case foo in f*) echo matched;; *) echo default;; esac
case x.txt in *.py|*.sh) echo script;; *.txt) echo text;; esac
case abc in a) echo a;; ab?) echo ab?;& x) echo fall;; y) echo no;; esac
case "" in "") echo empty;; esac
f() { echo "args: $# $1 $2"; return 3; }; f a b; echo $?
f() { local x=inner; echo $x; }; x=outer; f; echo $x
function g { echo "in g $@"; }; g 1 2
f() { echo "$@"; echo "$*"; for a in "$@"; do echo "[$a]"; done; }; f "a b" c
set -- x y z; echo $# $2; shift; echo $@
fact() { if [ $1 -le 1 ]; then echo 1; else echo $(( $1 * $(fact $(( $1 - 1 ))) )); fi; }; fact 10
true && echo and1; false && echo and2; false || echo or1; true || echo or2
! true; echo $?; ! false; echo $?
false; echo $?; true; echo $?
(exit 3); echo $?
(cd /; pwd); pwd | grep -vc '^/$'
{ echo a; echo b; } > g; cat g
x=1; (x=2; echo $x); echo $x
x=1; { x=2; }; echo $x
echo a | { read v; echo "v=$v"; }
v=; echo x | read v; echo "v=[$v]"
set -e; false; echo notreached
set -e; false || true; echo reached
set -e; if false; then :; fi; echo reached2
set -e; f() { false; echo notreached; }; f; echo not
set -o pipefail; false | true; echo $?
false | true; echo $?
true | false; echo $? ${PIPESTATUS[@]}
set -u; echo ${undefined_var:-ok}; echo $undefined_var; echo after
echo *.txt
echo nomatch*.zzz
echo "*.txt" '*'
echo d?r/*
echo [ab]*.txt
echo */
echo {a,b,c}.x pre{1..3}post {05..10..2} {z..x}
echo {a,b}{1,2}
echo ~ | grep -c /
test -f a.txt && echo file; test -d dir && echo dir; test -e nonexist || echo missing
[ -s a.txt ] && echo nonempty; [ -z "" ] && echo z; [ -n "x" ] && echo n
[ 1 -eq 1 -a 2 -gt 1 ] && echo ok; [ a = b -o c = c ] && echo ok2; [ ! -f nope ] && echo ok3
[ abc \< abd ] && echo lt; [ 10 -lt 9 ]; echo $?
[ 1 -eq x ]; echo $?
[ -f ]; echo $?; [ ]; echo $?; [ = ]; echo $?
[[ abc == a* ]] && echo glob; [[ abc =~ ^a(b)c$ ]] && echo "re ${BASH_REMATCH[1]}"
[[ -f a.txt && ! -d a.txt ]] && echo yes; [[ x < y ]] && echo lt
[[ -n $unset_var ]] || echo empty
[[ "a b" == "a b" ]] && echo spaced; [[ 5 -gt 3 ]] && echo num
arr=(one two three); echo ${arr[1]} ${#arr[@]} ${arr[@]}; arr+=(four); echo ${arr[-1]}
arr=(a b c); for x in "${arr[@]}"; do echo "<$x>"; done; echo ${!arr[@]}
declare -A m; m[k1]=v1; m[k2]=v2; echo ${m[k1]} ${#m[@]}
x="a b  c"; for w in $x; do echo "[$w]"; done; for w in "$x"; do echo "[$w]"; done
IFS=,; x="1,2,,3"; for w in $x; do echo "[$w]"; done
x="  lead trail  "; echo [$x]; echo "[$x]"
nosuchcommand_xyz; echo $?
./nonexist_script; echo $?
./dir; echo $?
cd nonexist_dir; echo $?
cd dir && pwd | sed 's|.*/||'; cd - >/dev/null; pwd | sed 's|.*/||'
cd; [ "$PWD" = "$HOME" ] && echo home
export FOO=bar; env | grep '^FOO='; sh -c 'echo $FOO'
FOO=temp sh -c 'echo $FOO'; echo "[$FOO]"
echo $0
ls nonexist 2>/dev/null; echo $?
ls nonexist > out.txt 2>&1; cat out.txt | wc -l
echo err 1>&2 2>/dev/null
{ echo o; echo e >&2; } 2>&1 | cat
{ echo o; echo e >&2; } 2>/dev/null
echo x > /dev/null; cat < /dev/null; echo done
echo both &> both.txt; cat both.txt
echo $(( 1/0 )); echo after
echo a; fi
echo "unterminated
x='single
if true; then echo x
for in; do
echo ok; ( echo sub
type cd echo nosuch; echo $?
command -v echo; command -v nosuchcmd; echo $?
eval 'echo evaled $((1+1))'; cmd='echo from var'; eval "$cmd"
echo 'echo sourced $1' > s.sh; . ./s.sh arg1; source s.sh arg2
printf 'echo from script $1\nexit 4\n' > t.sh; bash t.sh hi; echo $?
python3 -c 'import sys; print("py", sys.argv[1:]); sys.exit(3)' a b; echo $?
echo 'print(input().upper())' > p.py; echo hello | python3 p.py
python3 -c 'raise ValueError("boom")' 2>/dev/null; echo $?
printf 'import sys\nfor l in sys.stdin: print(len(l))\n' > q.py; printf 'ab\nc\n' | python3 q.py
python3 - <<'EOF'
print("heredoc python")
EOF
python3 -c 'print("x")' | tr x y
python3 -c 'import sys; sys.stderr.write("to err\n")' 2>&1 | wc -l
yes | head -2
yes abc | head -n 1
seq 1 100000 | head -1
x=$(yes | head -1); echo $x
FUNCNEST=50; f() { f; }; f 2>/dev/null; echo $?
f() { echo x; f; }; f 2>/dev/null | head -2
n=0; f() { n=$((n+1)); [ $n -lt 990 ] && f; }; f; echo $n
exit 7
echo before; exit; echo after
echo a\
b
echo "a\"b" 'a\b' "a\\b" "\$x"
echo $'a\tb\x41\'c'
echo "$(echo '"quoted"')"
echo "${x:-"a b"}" ${x:-'c  d'}
: > empty; [ -s empty ] || echo empty
x=1; x+=2; echo $x
a=b c=d; echo $a $c
sleep 0; echo slept
echo "tab	in"; echo a # comment
echo b#c '#x' "#y"
echo $((5 > 3))
let x=4*5 y=x+1; echo $x $y
v=abc; echo ${v@Q} ${#}
set -- a b c; echo ${@:2} ${*:1:2} $#
set -- "a b" c; echo "${@}" end; printf '[%s]\n' "$@" "$*"
trap 'echo bye' EXIT; echo hi
trap 'echo bye' EXIT INT TERM; echo hi; exit 3
f() { trap 'echo in-sub' EXIT; echo sub; }; (f); echo after
getopts_test() { while getopts "ab:c" o; do echo "$o ${OPTARG:-}"; done; }; getopts_test -a -b val -c
mapfile -t lines < a.txt; echo ${#lines[@]} ${lines[0]}
echo $(( 9223372036854775807 + 1 ))
echo ${x:?must be set}; echo after
unset x; echo ${x:?}; echo after
x=abc; echo ${x:5} "[${x:1:0}]"
echo "$(echo a; exit 3)" $?
x=$(false); echo $?
x=$(echo hi; false) || echo failed $x
echo $(cat a.txt)
echo "$(cat a.txt)"
cat a.txt | while read l; do echo "<$l>"; done | head -1
for i in $(seq 3); do echo -n $i; done; echo
echo a b c | wc -w
echo "x" | grep -q x && echo found
grep -q nomatch a.txt || echo none
echo -- -n
echo -n -e 'x\n'
printf '%s\n' "${arr[@]:-none}"
x=1; f() { x=2; }; f; echo $x
f() { return; }; false; f; echo $?
f() { echo in; }; unset -f f; f; echo $?
echo $(( 10 % 3 )) $(( -10 % 3 )) $(( 2 ** 62 ))
n=5; echo $(( n * (n + 1) / 2 ))
echo ${#arr[@]}; arr=(); echo ${#arr[@]}
s="hello world"; echo ${s// /_} ${s%% *} ${s#* }
path=/a/b/c.txt; echo ${path##*/} ${path%/*}
echo "${HOME_UNSET-unset}" "${PWD:+has pwd}"
[ "$(echo a)" = a ] && echo cmp
if [ -f a.txt ]; then cat a.txt; fi | wc -l
while false; do :; done; echo $?
x=0; while true; do x=$((x+1)); [ $x -ge 3 ] && break; done; echo $x
echo first; false; echo $?
true; echo ${?}
echo "$#"; set -- 1 2 3 4 5 6 7 8 9 10 11; echo ${11} $11
shift 20; echo $?
IFS= read -r l < a.txt; echo "[$l]"
echo "a,b,c" | { IFS=, read -r x y z; echo "$z$y$x"; }
echo ab | { read -n 1 c; echo $c; }
printf 'a:b\n' | cut -d: -f2
echo 'x' > 'sp ace.txt'; cat "sp ace.txt"; ls sp*
for x in "a b" c; do echo $x; done
echo `echo \`echo nested\``
echo "${x-}" end
f() { local -a arr=(1 2); echo ${arr[1]}; }; f
declare -i n=3+4; echo $n
readonly r=1; r=2; echo $r
echo $((08)) 2>/dev/null; echo $?
case 5 in [0-9]) echo digit;; esac
case ab in a\*) echo star;; "a"*) echo quoted;; esac
x=a*; case abc in $x) echo pat;; esac
echo {1..3}{a,b}
echo file{1,2}.{txt,log}
mkdir -p nd/{x,y}; ls nd
echo "$((1 + 2))" '$((1 + 2))'
echo ${!HOME*} 2>/dev/null | wc -w
printf 'b\na\n' > u1; printf 'a\nc\n' > u2; diff <(sort u1) <(sort u2); echo $?
while read l; do echo "[$l]"; done < <(printf 'x\ny\n')
f() { cat "$1"; }; f <(echo via-f)
exec 3>&1; exec > ex.out; echo to-file; exec 1>&3; cat ex.out
exec echo via-exec; echo not
echo $LINENO; echo ${BASH_VERSION%%.*}
x=$(cat <<EOF
in cmdsub heredoc $((2*3))
EOF
); echo "$x"
f() {
  cat <<EOF
func heredoc $1
EOF
}; f arg
echo $(( $(echo 3) + 1 )) $(( `echo 2` * 2 ))
cat <<EOF > hd.txt; cat hd.txt
to file
EOF
echo 'a b' | { read -a arr; echo ${arr[1]}; }
set -x; echo traced 2>/dev/null; set +x
time echo timed 2>/dev/null
IFS=: ; set -- a:b:c; echo "$*"; echo $2
"""

FIXTURE = {"a.txt": "alpha\nbeta\n", "b.txt": "bee\n", "dir/c.txt": "see\n", "dir/d.txt": "", ".hidden": "h\n"}


def make_fixture(root):
    for rel, text in FIXTURE.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Z_]+)\1")


def split_cases(text):
    cases = []
    cur = []
    for line in text.strip("\n").split("\n"):
        cur.append(line)
        if line.endswith("\\"):
            continue
        m = _HEREDOC.search(cur[0].replace("<<<", "   "))
        if m and not any(l.strip() == m.group(2) for l in cur[1:]):
            continue
        cases.append("\n".join(cur))
        cur = []
    if cur:
        cases.append("\n".join(cur))
    return cases


def run_bash(script, cwd):
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C", "HOME": cwd}
    p = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, timeout=20)
    return p.returncode, p.stdout, p.stderr


def run_ours(shell, script, cwd):
    saved = (os.getcwd(), dict(os.environ))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update({"PATH": saved[1]["PATH"], "LC_ALL": "C", "HOME": cwd, "PWD": cwd})
    err = io.BytesIO()
    real_err = sys.stderr
    wrapper = sys.stderr = io.TextIOWrapper(err, write_through=True)
    try:
        status, out = shell.run_capture(script, persist=False)
    finally:
        sys.stderr = real_err
        wrapper.flush()
        data = err.getvalue()
        wrapper.detach()
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
    return status, out, data


GUEST_MAIN = r'''
import importlib.util, io, json, os, sys, time
for name, file in [("vivarium_shell_text", "shell_text.py"), ("vivarium_shell_lang", "shell_lang.py"),
                   ("vivarium_shell_files", "shell_files.py"), ("vivarium_shell", "shell.py")]:
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
shell = sys.modules["vivarium_shell"]
cases = json.load(open("cases.json"))
fixture = json.load(open("fixture.json"))
top = os.getcwd()
results = []
real_out, real_err = sys.stdout, sys.stderr
t0 = time.perf_counter()
for i, case in enumerate(cases):
    d = os.path.join(top, "case%d" % i)
    for rel, text in fixture.items():
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    os.chdir(d)
    env = dict(os.environ)
    os.environ["HOME"] = d
    os.environ["PWD"] = d
    os.environ["LC_ALL"] = "C"
    err = io.BytesIO()
    sys.stderr = io.TextIOWrapper(err, write_through=True)
    try:
        status, out = shell.run_capture(case, persist=False)
    finally:
        sys.stderr.flush()
        sys.stderr.detach()
        sys.stderr = real_err
        os.chdir(top)
        os.environ.clear()
        os.environ.update(env)
    results.append([status, out.decode("latin-1").replace(d, "DIR").replace(os.path.basename(d), "DIR"),
                    err.getvalue().decode("latin-1")])
print(json.dumps({"results": results, "seconds": time.perf_counter() - t0}))
'''


def run_guest(vivarium, cases, verbose):
    guest = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "python-wasi", "guest"))
    d = tempfile.mkdtemp(prefix="shguest")
    try:
        with open(os.path.join(d, "main.py"), "w") as f:
            f.write(GUEST_MAIN)
        with open(os.path.join(d, "cases.json"), "w") as f:
            json.dump(cases, f)
        with open(os.path.join(d, "fixture.json"), "w") as f:
            json.dump(FIXTURE, f)
        cmd = [vivarium, "run", "--timeout-ms", "600000", "--fuel", "6000000000000",
               "--output-bytes", str(64 << 20), "--file", "cases.json=" + os.path.join(d, "cases.json"),
               "--file", "fixture.json=" + os.path.join(d, "fixture.json")]
        for name in ("shell.py", "shell_text.py", "shell_lang.py", "shell_files.py"):
            cmd += ["--file", "%s=%s" % (name, os.path.join(guest, name))]
        cmd.append(os.path.join(d, "main.py"))
        p = subprocess.run(cmd, capture_output=True, timeout=900)
        if p.returncode != 0:
            print(p.stdout.decode(errors="replace")[-3000:], p.stderr.decode(errors="replace")[-3000:])
            return 1
        data = json.loads(p.stdout.decode().strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    bad = 0
    for case, (status, out, err) in zip(cases, data["results"]):
        d1 = tempfile.mkdtemp(prefix="shlang")
        try:
            make_fixture(d1)
            want = run_bash(case, d1)
        finally:
            shutil.rmtree(d1, ignore_errors=True)
        w = (want[0], want[1].replace(d1.encode(), b"DIR").replace(os.path.basename(d1).encode(), b"DIR"))
        g = (status, out.encode("latin-1"))
        if w != g:
            bad += 1
            print("MISMATCH (guest): %s\n  bash: %r\n  ours: %r" % (case, w, g))
            if verbose:
                print("  bash err: %r\n  ours err: %r" % (want[2], err))
    print("%d cases in the guest, %d differ; the guest ran them in %.2f s" % (len(cases), bad, data["seconds"]))
    return 1 if bad else 0


def main(argv):
    verbose = "-v" in argv
    if "--guest" in argv:
        only = argv[argv.index("-k") + 1] if "-k" in argv else None
        cases = [c for c in split_cases(CASES) if not only or only in c]
        return run_guest(argv[argv.index("--guest") + 1], cases, verbose)
    only = argv[argv.index("-k") + 1] if "-k" in argv else None
    shell = run_host.load()
    cases = split_cases(CASES)
    bad = 0
    ran = 0
    for case in cases:
        if only and only not in case:
            continue
        ran += 1
        d1 = tempfile.mkdtemp(prefix="shlang")
        d2 = tempfile.mkdtemp(prefix="shlang")
        try:
            make_fixture(d1)
            make_fixture(d2)
            want = run_bash(case, d1)
            got = run_ours(shell, case, d2)
            w = (want[0], want[1].replace(d1.encode(), b"DIR").replace(os.path.basename(d1).encode(), b"DIR"))
            g = (got[0], got[1].replace(d2.encode(), b"DIR").replace(os.path.basename(d2).encode(), b"DIR"))
            if w != g:
                bad += 1
                print("MISMATCH: %s\n  bash: %r\n  ours: %r" % (case, w, g))
                if verbose:
                    print("  bash err: %r\n  ours err: %r" % (want[2], got[2]))
            elif verbose:
                print("ok: %s" % case.split("\n")[0])
        finally:
            shutil.rmtree(d1, ignore_errors=True)
            shutil.rmtree(d2, ignore_errors=True)
    print("%d cases, %d differ" % (ran, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

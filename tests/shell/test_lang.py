#!/usr/bin/env python3
"""Direct checks of vivarium_shell_lang (sed, awk, curl, wget; issue 49, H3) against the
machine's own tools.

Each sed / awk case runs in a fresh temporary directory holding FIXTURE, under `LC_ALL=C bash
-c` (GNU sed, the machine's awk) and under the guest shell in this process (host python3);
stdout and the exit status must match byte for byte. The curl / wget cases run both sides
against a real HTTP server on 127.0.0.1 started here (the reference is the machine's curl and
wget; without them those cases are skipped). Where the machine's awk is mawk and prints its
own choices (hash order for `for (k in a)`, integers past 2^31 as %.6g), AWK_EXPECTED holds
what gawk prints, which is what ours prints.

    python3 tests/shell/test_lang.py [-v] [-k SUBSTRING]
    python3 tests/shell/test_lang.py --guest target/debug/vivarium [-k SUBSTRING]
        # the sed / awk cases through the guest's CPython 3.15 (`vivarium run`)

Exits 1 when a case differs.
"""

import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_host  # noqa: E402

FIXTURE = {
    'app.py': 'def main():\n    print("hi")\n\nif __name__ == "__main__":\n    main()\n',
    'data.csv': 'name,age,city\nalice,30,paris\nbob,25,london\ncarol,35,paris\n',
    'dots.txt': 'x.y.z\n1.2.3\n',
    'f1': 'a\nb\nc\n',
    'f2': 'x\ny',
    'people.txt': 'alice 30 paris\nbob 25 london\ncarol 35 paris\ndave 40 berlin\neve 22 london\n',
    'pipes.txt': 'a|b|c\nd|e|f\n',
    'prog.awk': 'BEGIN { n = 0 }\n# comment\n{ n += $2 }\nEND { print "total", n }\n',
    'tabs.tsv': 'a\tb c\td\nx\ty\n',
    'text.txt': 'hello world\nfoo bar baz\n\nThe quick brown fox\njumps over the lazy dog\nfoo foo foo\nlast line\n',
}

# One case a line: a shell command line over FIXTURE.
CASES = r"""
sed 's/foo/X/' text.txt
sed 's/foo/X/g' text.txt
sed 's/foo/X/2' text.txt
sed 's/foo/X/2g' text.txt
sed -n 's/foo/X/p' text.txt
sed -n '2p' text.txt
sed -n '$p' text.txt
sed -n '2,4p' text.txt
sed '2,4d' text.txt
sed '/^$/d' text.txt
sed -n '/foo/,/lazy/p' text.txt
sed '/foo/!d' text.txt
sed -E 's/([a-z]+) ([a-z]+)/\2 \1/' text.txt
sed 's/\([a-z]*\) \([a-z]*\)/\2 \1/' text.txt
sed 's|o|0|g' text.txt
sed 's/o/[&]/g' text.txt
sed 's/[aeiou]//g' text.txt
sed 's/[[:space:]]\+/_/g' text.txt
sed 's/[[:upper:]]/\L&/g' text.txt
sed 's/\w\+/\u&/g' text.txt
sed -e 's/a/A/' -e 's/b/B/' text.txt
sed 's/a/A/;s/b/B/' text.txt
sed '1i\header' text.txt
sed '1i header' text.txt
sed '$a footer' text.txt
sed '2c\changed' text.txt
sed '2,3c\changed' text.txt
sed 'y/abc/xyz/' text.txt
sed = f1
sed -n '$=' text.txt
sed 'n;d' text.txt
sed '$!N;s/\n/ /' text.txt
sed -n 'h;n;G;p' text.txt
sed '1!G;h;$!d' text.txt
sed ':a;N;$!ba;s/\n/,/g' text.txt
sed '3q' text.txt
sed '3Q' text.txt
sed -n '/quick/{p;q}' text.txt
sed '/foo/{s/foo/F/;s/bar/B/}' text.txt
sed -n '1~2p' text.txt
sed -n '0~3p' text.txt
sed -n '2,+2p' text.txt
sed '0,/foo/s//X/' text.txt
sed -n l text.txt
sed 's/^/> /' text.txt
sed 's/$/;/' text.txt
sed 's/.*/"&"/' text.txt
sed -n '/^foo/p' text.txt
sed 's/o\{2\}/0/g' text.txt
sed -E 's/o{2}/0/g' text.txt
sed -E 's/(foo|bar)+/X/g' text.txt
sed 's/foo\|bar/X/g' text.txt
sed -i 's/foo/X/g' text.txt
sed -i.bak 's/foo/X/g' text.txt
sed -i -e '1d' f1 f2
sed p f2
sed 'a foo' f2
sed -n '$p' f1 f2
sed -s -n '1p' f1 f1
sed 's/x*/-/g' f1
sed 's/b*/X/2' f1
sed 'N;N;N' f1
sed '$!N;P;D' f1
sed 2q5 f1
sed -n '/a/,/b/{=;p}' f1
sed nosuchcmd f1
sed 's/a/b' f1
sed p nosuch f1
sed -n '/[0-9]\{2\}/p' people.txt
sed 's/,/\t/g' data.csv
sed '1d;s/,.*//' data.csv
sed -E 's/^([^,]*),([^,]*),.*/\2 \1/' data.csv
sed 's/\s\+$//' app.py
sed 's/print("hi")/print("bye")/' app.py
sed -n '/def/,/^$/p' app.py
sed '/^\s*$/d' app.py
sed 's/[.]/!/g;s/\./?/g' app.py
sed -E 's/\(/[/g' app.py
sed 's/\(/[/g' app.py
sed -n 'x;p' f1
sed G f1
sed -z 's/\n/,/g' f1
sed --expression='s/a/b/' f1
sed -n -e 2p -e 3p text.txt
sed 's/a/b/w out.txt' f1
sed '2r f2' f1
sed '1~3d' text.txt
sed '$d' text.txt
sed '2!d' f1
sed -n '2{p;p}' f1
sed 's/[^a-z]/#/g' app.py
sed -E 's/[0-9]+/<&>/g' people.txt
sed 's/[]]/x/' f1
sed 'H;$!d;x;s/\n/|/g' f1
sed -n '/alice/,+1p' people.txt
sed '/bob/,~4d' people.txt
sed -n '2,/london/p' people.txt
sed -n '/london/,2p' people.txt
sed '1,3!d' people.txt
sed -e :a -e '$q;N;3,$D;ba' people.txt
sed '$!d' people.txt
sed -n '$!{$!p}' people.txt
sed 's/\(a\)\(l\)/\2\1/' people.txt
sed -E 's/(.)(.)/\2\1/g' people.txt
sed 's/[0-9]\+/(&)/' people.txt
sed 's/[0-9]*/X/g' people.txt
sed 's/\b[a-z]/\u&/g' people.txt
sed -E 's/\<([a-z])/\U\1/g' people.txt
sed 's/.*/\U&/' people.txt
sed 's/\(.*\) \(.*\) \(.*\)/\3,\1/' people.txt
sed 's/ /\n/' people.txt
sed -n 's/^\(.\).*/\1/p' people.txt
sed 's/a/b/3' text.txt
sed 's/o/0/gI' text.txt
sed 's/HELLO/hi/I' text.txt
sed '/^$/,$d' text.txt
sed -n '/^$/=' text.txt
sed 'N;s/\n/+/' people.txt
sed '$!N;$!D' people.txt
sed -n 'H;${x;s/\n/,/g;s/^,//;p}' people.txt
sed '1h;1!H;$!d;g' people.txt
sed = people.txt | sed 'N;s/\n/\t/'
sed -n '2{n;p}' people.txt
sed '2{h;d};4{G}' people.txt
sed -E 's/^(\w+) (\w+)/\2 \1/' people.txt
sed 's/\s/_/g' people.txt
sed 's/\S\+/[&]/2' people.txt
sed -n '/a\|e/p' people.txt
sed -n '/\(ab\|bo\)/p' people.txt
sed -E -n '/^(a|b)/p' people.txt
sed 's/^[^ ]* //' people.txt
sed 's/[^[:alnum:] ]//g' app.py
sed 's/"[^"]*"/STR/g' app.py
sed -n '/^def/,/^$/{/^$/!p}' app.py
sed 's/^    //' app.py
sed 's/\t/TAB/g' tabs.tsv
sed 's/\./!/g' dots.txt
sed 's/[.]/!/2' dots.txt
sed 's/|/,/g' pipes.txt
sed 's/a|b/X/' pipes.txt
sed -E 's/a\|b/X/' pipes.txt
sed -E 's/a|d/X/' pipes.txt
sed 's/x\.y/X/' dots.txt
sed -n '1~2p;3q' people.txt
sed '2 s/bob/BOB/' people.txt
sed '/bob/ s/25/26/' people.txt
sed '2,3 { s/a/A/g }' people.txt
sed -n -e '/alice/ {' -e 'p' -e '}' people.txt
sed 'a\' people.txt
sed '2a\    indented' people.txt
sed '/bob/i\--' people.txt
sed '$a\' f2
sed 'c\' people.txt
sed '/eve/q1' people.txt; echo $?
sed -n '/nomatch/p' people.txt; echo $?
sed 's/x/y/;T;s/$/!/' f2
sed -e 's/a/A/;ta' -e 's/$/-/;:a' people.txt
sed ':x; s/aa/a/; tx' <<< 'aaaaab'
echo 'hello world' | sed 's/o/0/2'
echo 'a.b.c' | sed 's/\./\n/g'
echo 'path/to/file' | sed 's#/#_#g'
echo 'CamelCaseString' | sed -E 's/([A-Z])/_\L\1/g; s/^_//'
echo 'x  y   z' | sed 's/  */ /g'
echo 'key=value' | sed 's/=.*//'
echo 'key=value' | sed 's/.*=//'
echo '  trim me  ' | sed 's/^[ \t]*//;s/[ \t]*$//'
echo 'aaa' | sed 's/a/b/2g'
echo '123abc' | sed -E 's/[0-9]+//'
echo 'foo' | sed 's/o*$//'
echo 'abc' | sed 's/b*/x/g'
echo 'abc' | sed -E 's/()/x/g'
echo 'hello' | sed 's/l/L/3'
printf 'a\nb\n' | sed -n '$='
printf '' | sed 'p'
printf 'no newline' | sed 's/no/NO/'
printf 'a\n\n\nb\n\n\nc\n' | sed '/^$/N;/\n$/D'
sed --posix 's/a/b/' f1
sed -n -- '1p' f1
sed -s '1d' f1 f1
sed -i '' f1; cat f1
sed --in-place=.orig 's/a/A/' f1 && cat f1 f1.orig
sed -n 'l 5' people.txt
sed 's/a/b/w /dev/stdout' f1
sed -z 's/^a/X/' f1
sed 'R f2' f1
sed 'W out.txt' people.txt; cat out.txt
sed 'F' f1
sed '1~0p' f1
sed 's/a/\x41/' f1
sed -E 's/(a|b)+/<\0>/' f1
sed 'q;p' f1
sed '0~2d' people.txt
sed '2,1!d' people.txt
sed -n '/b/,/b/p' people.txt
sed -n '\,bob,p' people.txt
sed -n '\%bob%p' people.txt
sed 's/a\{2,\}/X/' people.txt
sed -E 's/a{1,2}/X/g' people.txt
sed 's/^/\t/' f1
sed 's/\n//' f1
sed '1!G;h;$!d' f1
sed -e '1{x;s/^/header/;x}' -e '${G}' f1
sed y/abc/ABC/ f1
sed 's/[a-c]/[&]/g;s/\[a\]/A/' f1
awk '{print $1}' people.txt
awk -F, '{print $2}' data.csv
awk -F, 'NR>1 {print $1, $3}' data.csv
awk -F, 'NR>1 {sum+=$2} END {print sum}' data.csv
awk -F, 'NR>1 {sum+=$2; n++} END {printf "%.2f\n", sum/n}' data.csv
awk -F, '$2 > 28 {print $1}' data.csv
awk -F, '$3 == "paris"' data.csv
awk '/foo/ {print NR": "$0}' text.txt
awk 'BEGIN {print "start"} {n++} END {print n " lines"}' text.txt
awk '{print NF}' text.txt
awk '{print $NF}' text.txt
awk 'length($0) > 10' text.txt
awk 'BEGIN {printf "%5s|%-5s|%05d\n", "ab", "cd", 42}'
awk 'BEGIN {x = 10; y = 3; print x / y, x % y, int(x / y)}'
awk '{print toupper($0)}' text.txt
awk '{ print length($0) }' text.txt
awk 'NR==2, NR==4' text.txt
awk 'NR % 2 == 0' text.txt
awk '{s = s $1 ","} END {print s}' people.txt
awk -v name=bob '$1 == name {print $2}' people.txt
awk 'BEGIN {OFS="-"} {$1 = $1; print}' people.txt
awk '{gsub(/o/, "0"); print}' text.txt
awk '{sub(/o/, "[&]"); print}' text.txt
awk 'END {print NR}' text.txt
awk '{a[NR] = $0} END {for (i = NR; i > 0; i--) print a[i]}' text.txt
awk 'BEGIN {split("a:b:c", p, ":"); print p[2]}'
awk 'BEGIN {print substr("hello world", 1, 5)}'
awk 'BEGIN {print index("hello", "ll")}'
awk '{if ($2 > max) {max = $2; who = $1}} END {print who, max}' people.txt
awk 'BEGIN { exit 3 }'; echo $?
awk '!seen[$3]++' people.txt
awk '{ $2 = $2 * 2 } 1' people.txt
awk 'BEGIN{print 1e6, 1e-5, 123456789, 0.000001, 3.0*2, 0.1+0.2, 1/3, -0}'
awk 'BEGIN{printf "%c%c%c\n", 65, "BC", 256+66; printf "%d %i %5.2f %e %g %x %o %s %%\n", "3.9x", -2.5, 3.14159, 12345.678, 0.0001234, 255, 8, 12; printf "%*d|%-*d|\n", 5, 42, 4, 7}'
awk 'BEGIN{print 1==1.0, "a"<"b", 2<10, "2"<"10", substr("abc",2,100)}'
awk 'BEGIN{CONVFMT="%.2g"; x=3.14159; y=x ""; print y; OFMT="%.3f"; print x, 17, x ""}'
awk 'BEGIN{n=split("a b  c", arr); print n, arr[3]; n=split("", e); print n}'
awk 'BEGIN{x; print length(x); print x+0; s = sprintf("%5.1f%%", 12.345); print s}'
awk '{ $5="e"; print; print NF; NF=2; print; $0="x y"; print $2, NF }' people.txt
awk '{$1=$1; print "[" $0 "]"}' text.txt
awk -F: -v OFS=- '{$2="X"}1' data.csv
awk -F'[0-9]' '{print $2, NF}' people.txt
awk 'BEGIN{RS=""}{print NR": "$0"|"NF}' text.txt
awk 'BEGIN{printf "%5.3s|%-3c|%+d|% d|%#o|%#x|%X|%E|%G\n", "abcdef", "x", 5, 5, 8, 255, 255, 1.5, 0.00001}'
awk 'function f(a,  b) { b = a * 2; return b } BEGIN { print f(3), f() }'
awk 'BEGIN{ s="aaa"; n=gsub(/a/, "&&", s); print n, s; t="x.y.z"; gsub(/\./, "\\&", t); print t; u="hello"; sub(/l+/, "[&]", u); print u}'
awk 'BEGIN{print match("foobar", /o+/), RSTART, RLENGTH; print match("abc", /z/), RSTART, RLENGTH}'
awk 'function fib(n) { return n < 2 ? n : fib(n-1) + fib(n-2) } BEGIN { print fib(20) }'
awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? OFS : ORS) }' people.txt
awk '{ n = split($0, w, / +/); for (i = 1; i <= n; i++) c[w[i]]++ } END { print c["foo"] }' text.txt
awk 'BEGIN { while (i < 5) { i++; if (i == 2) continue; if (i == 4) break; print i } }'
awk 'BEGIN { do { k++ } while (k < 3); print k }'
awk 'NR == 1 { next } { print }' people.txt
awk '$2 ~ /^[0-9]+$/ && $2 >= 30' people.txt
awk '$1 !~ /a/' people.txt
awk 'BEGIN { a["x"] = 1; if ("x" in a) print "yes"; if (!("y" in a)) print "no"; delete a["x"]; print length(a) }'
awk 'BEGIN { a[1,2] = 3; for (k in a) { split(k, p, SUBSEP); print p[1], p[2], a[k] } }'
awk '{ print $1 > "out.txt" } END { close("out.txt"); while ((getline line < "out.txt") > 0) print "got", line }' people.txt
awk 'BEGIN { "echo hi" | getline x; print x }'
awk 'NR==1 { getline; print "after getline:", $0 }' people.txt
awk 'BEGIN { x = "abc"; print x > "f.out"; print "more" >> "f.out" }'; cat f.out
awk '{ print NR, FNR, FILENAME }' f1 f2
awk 'END { print $0 }' people.txt
awk '{ total += $2 } END { print total / NR }' people.txt
awk 'BEGIN { print length("hello"), tolower("ABC"), int(-3.7), int("4.9x"), 7%3, -7%3, 10/4 }'
awk 'BEGIN { print -3 % 2, 2^10, 2^0.5 }'
awk 'BEGIN { x = 5; x += 2; x -= 1; x *= 3; x /= 2; x %= 4; x ^= 2; print x }'
awk 'BEGIN { print substr("hello", 2), substr("hello", 2, 3), substr("hello", 10) "|" }'
awk -F'\t' '{print $2}' tabs.tsv
awk '{ printf "%-8s %3d\n", $1, $2 }' people.txt
awk 'BEGIN { n = split("2024-01-15", d, "-"); print d[1] + 0, d[2] + 0, d[3] + 0 }'
echo '3 4' | awk '{print $1 * $2}'
printf 'a b\nc d\n' | awk '{print $2 $1}'
seq 10 | awk '{s+=$1} END {print s}'
seq 5 | awk '{s += $1} END {print s / NR}'
awk 'BEGIN { printf("%d items\n", 3) }'
awk 'BEGIN { print (1, 2) > "/dev/stdout" }'
awk 'BEGIN { print 1 > 2 }'; cat 2
awk '{ print $1 }' nosuchfile; echo $?
awk 'BEGIN { print 1' ; echo $?
awk '/^$/ { blank++ } END { print blank + 0 }' text.txt
awk 'BEGIN { s = "a.b.c"; n = split(s, parts, "."); print n, parts[1] }'
awk '{ print length }' people.txt
awk 'BEGIN { x["a"]; print length(x) }'
awk -v n=3 'NR <= n' people.txt
awk 'NR > 1 { print prev } { prev = $0 }' people.txt
awk '{ $3 = ""; print }' people.txt
awk 'BEGIN { print toupper(substr("abc", 2)) }'
awk 'BEGIN{printf "%.3e\n", 123456}'
awk '$2 > 25 && $3 == "paris" { print $1 }' people.txt
awk '{ sum[$3] += $2 } END { for (c in sum) printf "%s=%d\n", c, sum[c] }' people.txt | sort
awk 'BEGIN { getline line < "people.txt"; print line }'
awk 'BEGIN { while ((getline l < "nosuch") > 0) n++; print n+0 }'
awk '{ print NR ": " $0 }' f2
awk 'BEGIN { ORS = "\n\n" } { print $1 }' people.txt
awk 'BEGIN { FS = "," } { print $1 }' data.csv
awk '{ print $(NF-1) }' people.txt
awk '{ $0 = toupper($0); print $1 }' people.txt
awk 'BEGIN { a = "10"; b = 9; print (a < b), ("10" < "9"), (a+0 < b) }'
awk '{ if ($1 == "bob") print "found", NR; else if ($1 == "eve") print "eve"; else print "other" }' people.txt
awk '{print $1 "\t" $2}' people.txt
awk 'BEGIN{FS=OFS=","} {print $2,$1}' data.csv
awk '{printf "%s ", $1} END {print ""}' people.txt
awk 'NF' text.txt
awk 'NR==FNR {a[$1]; next} $1 in a' people.txt people.txt
awk '{print > ($3 ".out")} END {close("paris.out"); while ((getline l < "paris.out") > 0) print "p:", l}' people.txt
awk '{ $1 = ""; sub(/^ /, ""); print }' people.txt
awk '{ print substr($0, index($0, " ")+1) }' people.txt
awk 'length > 12' people.txt
awk '/bob/,/dave/' people.txt
awk -v OFS=, '{ print $1, $2 }' people.txt
awk '{ lines[NR] = $0 } END { print lines[NR-1] }' people.txt
awk 'BEGIN { printf "%-20s|\n", "left" }'
awk '{ $NF = ""; print }' people.txt
awk 'END{print NR}' RS= text.txt
awk '{print FILENAME}' f1 f2
awk 'BEGIN { x = "3x"; print x + 1, +x, -x }'
awk '{ print ($2 > 30) ? $1 : "young" }' people.txt
awk -v pat=o '$0 ~ pat' people.txt
awk '{ print length() }' people.txt
awk '$1 == "alice" { $2 = $2 + 1 } 1' people.txt
awk '{ print NR % 2 ? "odd" : "even" }' people.txt
awk '{ a = a ? a "," $1 : $1 } END { print a }' people.txt
awk 'BEGIN { printf "%5.1f%%\n", 45.67 }'
awk '{ print toupper(substr($1,1,1)) substr($1,2) }' people.txt
awk -F'|' '{print $2}' pipes.txt
awk -F. '{print $2}' dots.txt
awk -F'[:,]' '{print $2}' data.csv
awk '{ sum = 0; for (i = 2; i <= NF; i++) sum += $i; print sum }' people.txt
awk '{print $1}' OFS=, people.txt
awk 'BEGIN { print x + 0, x "", length(x) }'
printf 'a b\r\nc d\r\n' | awk '{print $2 "|"}'
awk 'BEGIN { printf "%d%%\n", 45.7 }'
awk 'BEGIN { printf "%x %o %e %5.2e\n", 255, 8, 0, 1234.5 }'
awk 'BEGIN { print substr("hello", 0), substr("hello", -1), substr("hello", 1, 0) "|" }'
awk 'BEGIN { print index("", "a"), length("") }'
awk '{ n++ } END { print n+0 }' /dev/null
awk '/\./' dots.txt
awk '/[[:digit:]]+/' dots.txt
awk '/^#/ {next} {print}' app.py
awk '{ print $1, $2 > "/dev/stderr" }' people.txt
awk 'BEGIN { while (("ls" | getline f) > 0) n++; print (n > 0) }'
awk -F, 'NR>1 { print $1 > $3 ".txt" } END { close("paris.txt"); system("cat paris.txt") }' data.csv
echo "a b c" | awk '{$2=""; print NF, $0}'
awk '{ print $1 }' people.txt | sort | uniq -c | sort -rn | head -3
awk 'BEGIN { printf "%s\n", 1e6 }'
awk 'BEGIN { printf "%s %s\n", 0.1, 100/3 }'
awk 'BEGIN { printf "%i|%5s|%-5d|%.3d\n", 42.9, "ab", 7, 5 }'
awk 'BEGIN { print length(12345), length(1/4) }'
awk '{ printf("%s:%d\n", $1, $2) }' people.txt
awk 'BEGIN { a["x"]=1; for (k in a) delete a[k]; print length(a) }'
awk '{ print; print "" }' f1
awk 'BEGIN { RS = ";" } { print NR ": " $0 }' <<< 'a;b;c'
awk '{ gsub(/[aeiou]/, ""); print }' people.txt
awk '{ gsub("a", "A", $1); print }' people.txt
awk '{ n = gsub(/o/, "&"); total += n } END { print total }' text.txt
awk 'BEGIN { s = "hello world"; gsub(/o/, "\\&", s); print s }'
awk 'BEGIN { s = "a.b"; sub(".", "X", s); print s }'
awk 'BEGIN { print match("xxabc", "ab"), RSTART, RLENGTH }'
awk 'BEGIN { x = 1; x++; ++x; x--; print x, x++ + ++x }'
awk 'BEGIN { print 1 - -1, 2 - - 2, -2 ^ 2, 2 ^ 3 ^ 2 }'
awk 'BEGIN { print 1 " " 2, 1 + 2 " " 3 }'
awk 'BEGIN { print (1 == 1) (2 < 1) }'
awk 'BEGIN { print !0, !1, !"", !"a", - "3" }'
awk 'BEGIN { a = "x"; a = a a a; print a }'
awk 'BEGIN { if (!(3 in a)) print "absent"; a[3]; if (3 in a) print "present" }'
awk 'BEGIN { printf "a" "b" "\n" }'
awk 'BEGIN { print substr("abcdef", 3, 2) }'
awk '{ $3 = toupper($3) } { print }' people.txt
awk 'NR == 2 { exit } { print } END { print "end" }' people.txt
awk 'BEGIN { exit } END { print "end runs" }'
awk '{ exit 4 } END { exit }' people.txt; echo $?
awk 'BEGIN { print "x" > "/dev/stdout" }'
awk 'BEGIN { printf "%c", 10 }'
awk 'BEGIN { print 3 / 2, 7 / 7, 1e3 / 1e-3 }'
awk 'BEGIN { print int(3.9), int(-0.5), int("12abc") }'
awk 'BEGIN { print sqrt(16), exp(0), log(1), sin(0), cos(0), atan2(0, -1) }'
awk 'BEGIN { srand(1); r = rand(); print (r >= 0 && r < 1) }'
awk '{ w += NF; c += length($0) + 1 } END { print NR, w, c }' text.txt
awk 'BEGIN { x = "abc"; print x ~ /b/, x ~ "^a", x !~ /z/ }'
awk '$0 ~ /^[a-z]+ [0-9]+/ { print $1 }' people.txt
awk 'BEGIN { n = split("a1b2c3", p, /[0-9]/); print n, p[1], p[3], p[4] "|" }'
awk '{ print $NF; $0 = "new record here"; print $2, NF }' f1
awk -f prog.awk people.txt
awk 'BEGIN{printf "%.2f\n", 2.675; printf "%.0f %.0f\n", 0.5, 1.5}'
awk 'BEGIN { print 0.000012345, 123456.7, 1234567.8 }'
awk '{print $2+0}' text.txt
awk '{$0=$0; print NF}' people.txt
awk 'BEGIN{ORS=" "} {print $1} END{ORS="\n"; print ""}' people.txt
awk '!/^$/ && !/^#/' app.py
awk '{ print NR": "$0 }' app.py | tail -2
awk 'NR>1' data.csv | awk -F, '{print $1}'
awk 'BEGIN { "echo 5" | getline n; print n * 2 }'
awk '{ getline line < "f1"; print $1, line }' people.txt
awk -v 'x=a\tb' 'BEGIN { print x }'
awk 'BEGIN { print "a/b" ~ /a\/b/ }'
awk '{ print $1 }' FS=, data.csv
awk 'BEGIN { printf "%s %s\n", 3.0, 3.5 }'
awk 'BEGIN { x = 0.1 * 3; print x, x "" }'
awk 'BEGIN { print length(12.0) }'
awk 'BEGIN { a = 1; b = "1"; print (a == b) }'
awk '{ print ($2 == 30) }' people.txt
awk '$2 == "30"' people.txt
awk 'BEGIN { print 1 == "1.0", "abc" < "abd", 10 < 9 }'
awk 'BEGIN { x[1] = 1; x["1"] = 2; print length(x), x[1] }'
awk 'BEGIN { x[0.5 + 0.5] = "one"; print x[1] }'
awk 'NR==1, /carol/ { print NR }' people.txt
awk '/bob/, 0' people.txt
awk 'BEGIN { s = sprintf("%03d-%s", 7, "x"); print s }'
awk 'BEGIN { printf "%s|%5s|%-5s|\n", "", "", "" }'
awk '{ print $1 ~ "^[a-c]" ? "early" : "late" }' people.txt
awk 'BEGIN { "pwd" | getline d; print (length(d) > 0) }'
awk 'BEGIN { n = split("abc", a, ""); print n, a[1], a[3] }'
awk '{ $2 = ""; $0 = $0; print NF }' people.txt
awk 'BEGIN { OFS = ":" } { NF = 2; print }' people.txt
awk 'BEGIN { OFS = "-" } { $1 = $1 } 1' people.txt
awk 'NR == 1 { print; next } { print "  " $0 }' people.txt
awk 'function add(a, b) { return a + b } { print add($2, 1) }' people.txt
awk 'function inc(arr, k) { arr[k]++ } { inc(c, $3) } END { print c["paris"], c["london"] }' people.txt
awk 'function f(x) { x = 5 } BEGIN { y = 1; f(y); print y }'
awk 'function max(a, b) { return a > b ? a : b } { m = max(m, $2) } END { print m }' people.txt
awk 'BEGIN { i = 5; while (i--) printf "%d ", i; print "" }'
awk 'BEGIN { for (i = 0; i < 3; i++) for (j = 0; j < 2; j++) printf "%d%d ", i, j; print "" }'
awk 'BEGIN { for (;;) { if (++n > 3) break }; print n }'
awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { print s }' people.txt
awk 'BEGIN { printf "%5.2f%%\n", 12.3456 }'
awk 'BEGIN { print toupper(123), tolower("MiXeD") }'
awk 'BEGIN { x = "A"; x = x x; x = x x; print x, length(x) }'
awk 'BEGIN { print 1; exit; print 2 }'
awk 'END { print NR, $1 }' people.txt
awk 'BEGIN { while ((getline line < "people.txt") > 0) n++; close("people.txt"); while ((getline line < "people.txt") > 0) n++; print n }'
awk 'BEGIN { print -0.0, 1/-3 }'
awk '{ print > "out_" NR ".txt" } END { print "done" }' f1
awk 'BEGIN { printf "[%10.3s]\n", "abcdef" }'
awk 'BEGIN { print index("abc", "c"), index("abc", "x") }'
awk '{ printf "%s%s", sep, $1; sep = "," } END { print "" }' people.txt
awk 'BEGIN { RS = "" ; FS = "\n" } { print NF ": " $1 }' text.txt
awk 'BEGIN { x = "1e3"; print x + 0, x * 1 }'
awk 'BEGIN { print 1e300 * 1e300, -1e300 * 1e300, log(-1) }'
awk 'BEGIN { print 2 ^ -1, 2 ^ 0.5 }'
awk '{ s = $0; gsub(/[^a-z]/, "", s); print s }' people.txt
awk '{ print NR, NF, $NF }' text.txt
awk '$NF ~ /on$/' people.txt
awk 'BEGIN { a["b"] = 1; delete a; a["c"] = 2; for (k in a) print k }'
awk 'BEGIN { print length() }' < people.txt
awk '{ n = n + length($0) } END { print n }' people.txt
awk 'BEGIN { printf "%s\n", substr("abc", 2, 1000000) }'
awk 'BEGIN{ x = 3; x = x "" ; print x + 1, x 1 }'
awk 'BEGIN { print 10 " apples" + 0 }'
awk -F '' '{ print NF, $2 }' f1
awk 'BEGIN { s = "aaa"; print gsub(/x*/, "-", s), s }'
awk 'BEGIN { s = "abc"; sub(/$/, "!", s); sub(/^/, "^", s); print s }'
awk 'BEGIN { s = "foo.bar"; n = split(s, a, "."); print n, a[2] }'
awk 'BEGIN { s = "a  b"; n = split(s, a, " "); print n, a[2] }'
awk 'BEGIN { s = "a,b,,c,"; n = split(s, a, ","); print n, a[3] "|" a[5] "|" }'
sed '/b/a\
line1\
line2' f1
sed 's/ /\
/' people.txt
sed '1d
3d' people.txt
"""

# What gawk prints where the machine's awk (mawk) makes its own choice.
AWK_EXPECTED = [
    ("awk '{count[$3]++} END {for (c in count) print c, count[c]}' people.txt",
     b"paris 2\nlondon 2\nberlin 1\n", 0),
    ("awk 'BEGIN{x = 2147483647; print x, x+1; printf \"%d\\n\", 2^31}'",
     b"2147483647 2147483648\n2147483648\n", 0),
    ("awk 'BEGIN { print 100000 * 100000 }'", b"10000000000\n", 0),
    ("seq 100000 | awk '{s+=$1} END {print s}'", b"5000050000\n", 0),
    ("awk 'BEGIN{while (1) print \"y\"}' | head -2", b"y\ny\n", 0),
]

# curl / wget against the server started here: $U is its base URL, $HP its host:port.
NET_CASES = r"""
curl -s $U/hello
curl $U/hello
curl -s $U/404
curl -sf $U/404
curl -sSf $U/404
curl -s $U/redir
curl -sL $U/redir
curl -s -o out.txt $U/hello
curl -sO $U/data.json
curl -s -X POST -d 'a=1' -d 'b=2' $U/echo
curl -s -d @f1 $U/echo
curl -s --data-binary @f1 $U/echo
curl -s --data-raw @f1 $U/echo
curl -s -H 'X-Test: yes' -H 'Content-Type: text/plain' -d hi $U/echo
curl -s --json '{"k":1}' $U/echo
curl -s -u bob:pw $U/echo
curl -s -X DELETE $U/echo
curl -s -G -d q=1 $U/echo
curl -s --data-urlencode 'q=a b&c' $U/echo
curl -s -w '%{http_code}\n' -o /dev/null $U/hello
curl -s -w '%{http_code}\n' $U/404
curl -si $U/hello
curl -sI $U/hello
curl -s http://127.0.0.1:1/
curl -sS http://127.0.0.1:1/
curl -sS http://nosuchhost.invalid/
curl -sS -w '%{http_code}\n' http://127.0.0.1:1/
curl -s $HP/hello
curl -sL -w '%{url_effective} %{num_redirects}\n' $U/redir
curl --fail-with-body -s $U/404
curl
curl -s --bogus $U/hello
wget -q $U/hello
wget -q -O - $U/hello
wget -qO- $U/data.json
wget -q -O got.txt $U/hello
wget -q $U/404
wget -q http://nosuchhost.invalid/
wget -q $U/
wget -q $U/hello $U/hello
curl -s -F name=bob -F file=@f1 -F 'doc=<f2;type=text/plain' $U/echo | sed 's/-\{20,\}[0-9a-f]*/B/g'
curl -s -o /dev/null -w '%{http_code} %{content_type}\n' $U/data.json
"""


def split_cases(text):
    """One case a line; a line ending in a backslash or inside an open quote continues."""
    out = []
    cur = []
    for line in text.split("\n"):
        if not cur and not line.strip():
            continue
        cur.append(line)
        joined = "\n".join(cur)
        if _balanced(joined) and not joined.endswith("\\"):
            out.append(joined)
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


def _balanced(s):
    q = None
    i = 0
    while i < len(s):
        c = s[i]
        if q is None:
            if c in "'\"":
                q = c
            elif c == "\\":
                i += 1
        elif q == "'" and c == "'":
            q = None
        elif q == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                q = None
        i += 1
    return q is None


def make_fixture(root):
    for rel, text in FIXTURE.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(text.encode("latin-1"))


def env_for(cwd):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": cwd}


def run_bash(script, cwd):
    p = subprocess.run(["bash", "-c", script], cwd=cwd, env=env_for(cwd), capture_output=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def run_ours(shell, script, cwd):
    saved = (os.getcwd(), dict(os.environ))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env_for(cwd), PWD=cwd)
    err = io.BytesIO()
    real_err = sys.stderr
    sys.stderr = io.TextIOWrapper(err, write_through=True)
    try:
        status, out = shell.run_capture(script, persist=False)
    finally:
        sys.stderr.flush()
        sys.stderr.detach()
        sys.stderr = real_err
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
    return status, out, err.getvalue()


def files_of(root):
    return {n: open(os.path.join(root, n), "rb").read() for n in sorted(os.listdir(root))
            if os.path.isfile(os.path.join(root, n))}


def compare(shell, case, verbose, expected=None, subst=None):
    """Runs case both ways; True when stdout, status and the files left behind agree."""
    d1 = tempfile.mkdtemp(prefix="h3lang")
    d2 = tempfile.mkdtemp(prefix="h3lang")
    try:
        make_fixture(d1)
        make_fixture(d2)
        script = case
        for k, v in (subst or {}).items():
            script = script.replace(k, v)
        if expected is None:
            want = run_bash(script, d1)
        else:
            want = (expected[1], expected[0], b"")
        got = run_ours(shell, script, d2)
        same = (want[0], want[1]) == (got[0], got[1])
        if same and expected is None:
            same = files_of(d1) == files_of(d2)
        if not same:
            print("MISMATCH: %s\n  want: %r %r\n  ours: %r %r" % (case, want[0], want[1][:400], got[0], got[1][:400]))
            if verbose:
                print("  want err: %r\n  ours err: %r" % (want[2][-400:], got[2][-400:]))
        return same
    finally:
        shutil.rmtree(d1, ignore_errors=True)
        shutil.rmtree(d2, ignore_errors=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def version_string(self):
        return "testsrv"

    def date_time_string(self, t=None):
        return "Thu, 01 Jan 2026 00:00:00 GMT"

    def reply(self, code, body, ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        p = self.path
        if p.startswith("/hello"):
            return self.reply(200, b"hello\n")
        if p.startswith("/404"):
            return self.reply(404, b"nope\n")
        if p.startswith("/redir"):
            return self.reply(302, b"", extra=[("Location", "/hello")])
        if p.startswith("/data.json"):
            return self.reply(200, b'{"a": 1, "b": [1, 2]}\n', "application/json")
        if p.startswith("/echo"):
            d = {"method": self.command, "path": p, "body": body.decode("latin-1"),
                 "ct": self.headers.get("Content-Type"), "auth": self.headers.get("Authorization"),
                 "x": self.headers.get("X-Test"), "accept": self.headers.get("Accept")}
            return self.reply(200, (json.dumps(d, sort_keys=True) + "\n").encode(), "application/json")
        return self.reply(404, b"not found\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any


def run_guest(vivarium, cases, verbose):
    import test_shell_lang

    guest = os.path.normpath(os.path.join(HERE, "..", "..", "python-wasi", "guest"))
    d = tempfile.mkdtemp(prefix="h3guest")
    try:
        with open(os.path.join(d, "main.py"), "w") as f:
            f.write(test_shell_lang.GUEST_MAIN)
        with open(os.path.join(d, "cases.json"), "w") as f:
            json.dump(cases, f)
        with open(os.path.join(d, "fixture.json"), "w") as f:
            json.dump(FIXTURE, f)
        cmd = [vivarium, "run", "--timeout-ms", "600000", "--fuel", "5000000000000",
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
        d1 = tempfile.mkdtemp(prefix="h3lang")
        try:
            make_fixture(d1)
            want = run_bash(case, d1)
        finally:
            shutil.rmtree(d1, ignore_errors=True)
        if (want[0], want[1]) != (status, out.encode("latin-1")):
            bad += 1
            print("MISMATCH (guest): %s\n  want: %r\n  ours: %r" % (case, want[:2], (status, out)))
            if verbose:
                print("  ours err: %r" % err)
    print("%d cases in the guest, %d differ; the guest ran them in %.2f s" % (len(cases), bad, data["seconds"]))
    return 1 if bad else 0


def main(argv):
    verbose = "-v" in argv
    only = argv[argv.index("-k") + 1] if "-k" in argv else None
    cases = [c for c in split_cases(CASES) if only is None or only in c]
    if "--guest" in argv:
        return run_guest(argv[argv.index("--guest") + 1], cases, verbose)
    shell = run_host.load()
    t0 = time.perf_counter()
    bad = 0
    n = 0
    for case in cases:
        n += 1
        bad += not compare(shell, case, verbose)
    for case, out, status in AWK_EXPECTED:
        if only is None or only in case:
            n += 1
            bad += not compare(shell, case, verbose, expected=(out, status))
    net = [c for c in split_cases(NET_CASES) if only is None or only in c]
    if net and shutil.which("curl") and shutil.which("wget"):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        hp = "127.0.0.1:%d" % server.server_address[1]
        try:
            for case in net:
                n += 1
                bad += not compare(shell, case, verbose, subst={"$U": "http://" + hp, "$HP": hp})
        finally:
            server.shutdown()
            server.server_close()
    elif net:
        print("curl / wget cases skipped: the machine has no curl or wget to compare with")
    print("%d cases, %d differ (%.1f s)" % (n, bad, time.perf_counter() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

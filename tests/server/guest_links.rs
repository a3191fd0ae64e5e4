//! Links a guest makes in its sandbox: the host follows none (every path it opens there
//! goes through a directory handle that refuses to leave), and refuses, when it is made,
//! any link whose target is absolute or climbs out of the sandbox (EPERM: Python's
//! `PermissionError`), so nothing that might follow it later is led outside.

use crate::http_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_whose_target_leaves_the_sandbox_is_refused_when_it_is_made() {
    let api = shared().await;
    let code = r#"
import errno, os
def link(target, name):
    try:
        os.symlink(target, name)
        return 'made ' + os.readlink(name)
    except OSError as e:
        return errno.errorcode[e.errno] + ' ' + type(e).__name__
os.makedirs('d/e')
os.symlink('.', 'here')
for target, name in [
    ('../../../etc', 'x'),        # out from the top
    ('/etc/passwd', 'abs'),       # absolute
    ('a/b', 'in'),                # inside, not yet there
    ('../../f', 'd/e/up'),        # two up from two down: the top
    ('../../../f', 'd/e/out'),    # one more: out
    ('e/../../../f', 'd/sneak'),  # down and up again, past the top
    ('../f', 'here/l'),           # `here` is the top itself, not a folder below it
    ('../f', '/tmp/home/l'),      # an absolute name of a folder two down
]:
    print(name, link(target, name))
"#;
    let v = api.run(code).await;
    let out: Vec<&str> = v["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(
        out,
        [
            "x EPERM PermissionError",
            "abs EPERM PermissionError",
            "in made a/b",
            "d/e/up made ../../f",
            "d/e/out EPERM PermissionError",
            "d/sneak EPERM PermissionError",
            "here/l EPERM PermissionError",
            "/tmp/home/l made ../f",
        ],
        "{v}"
    );
}

"""Debian's archive as mallocsweep reads it: Packages stanzas recorded from bookworm, trixie and sid
(apt-cache show, November 2026), which release carries a version, the allocator packages of a
release across the t64 renames, and SPEC errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.acquire import archive
from servers.acquire.archive import (
    Package,
    choose,
    parse_packages,
    parse_spec,
    pick_allocator_packages,
)
from servers.errors import ServerError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "archive"
ORDER = ("bookworm", "trixie", "sid")


def _found(name: str = "servers") -> dict[str, list[Package]]:
    return {r: parse_packages((FIX / f"{r}-{name}.Packages").read_text()) for r in ORDER}


def test_parse_packages_reads_every_version_with_its_fields():
    pkgs = parse_packages((FIX / "bookworm-servers.Packages").read_text())
    assert [(p.name, p.version) for p in pkgs] == [
        ("mariadb-server-core", "1:10.11.19-0+deb12u1"),
        ("mariadb-server-core", "1:10.11.18-0+deb12u1"),
    ]
    p = pkgs[1]
    assert p.source == "mariadb"
    assert p.upstream == "10.11.18"
    assert p.installed_size_kb == 44908
    assert p.depends[0] == "mariadb-common"
    assert "libc6" in p.depends and "(" not in " ".join(p.depends)


def test_parse_packages_folds_continuations_and_skips_broken_stanzas():
    text = (
        "Package: a\nVersion: 1.0-1\nSource: src (1.0-0)\nDepends: b | c (>= 2), d:any\n"
        "Description: short\n long line one\n .\n long line two\n\n"
        "Package: no-version\n\n\nnot a field line\n"
    )
    [p] = parse_packages(text)
    assert p.source == "src"
    assert p.depends == ("b", "d")
    assert p.fields["Description"] == "short\nlong line one\n.\nlong line two"


@pytest.mark.parametrize(
    "debian, upstream",
    [
        ("1:11.8.9+ds-0+deb13u1", "11.8.9"),
        ("9.7.4-2", "9.7.4"),
        ("1:10.11.18-0+deb12u1", "10.11.18"),
        ("2.43-7", "2.43"),
        ("5.3.0-1", "5.3.0"),
    ],
)
def test_upstream_version(debian, upstream):
    assert archive.upstream_version(debian) == upstream


@pytest.mark.parametrize(
    "spec, release, version",
    [
        ("mariadb-10.11.18", "bookworm", "1:10.11.18-0+deb12u1"),
        ("mariadb-10.11.19", "bookworm", "1:10.11.19-0+deb12u1"),
        # both trixie and sid carry 11.8.9: the stable release comes first
        ("mariadb-11.8.9", "trixie", "1:11.8.9+ds-0+deb13u1"),
        ("mysql-9.7.4", "sid", "9.7.4-2"),
    ],
)
def test_choose_finds_the_release(spec, release, version):
    got = choose(parse_spec(spec), _found())
    assert (got.release, got.package.version) == (release, version)


def test_choose_prefers_the_order_given():
    found = _found()
    got = choose(parse_spec("mariadb-11.8.9"), {r: found[r] for r in ("sid", "trixie")})
    assert got.release == "sid"


def test_unavailable_version_lists_what_each_release_has():
    with pytest.raises(ServerError) as e:
        choose(parse_spec("mariadb-10.11.17"), _found())
    msg = str(e.value)
    assert "\n" not in msg
    assert "mariadb-10.11.17 is not in Debian's archive" in msg
    assert "10.11.19, 10.11.18 (bookworm); 11.8.9 (trixie); 11.8.9 (sid)" in msg


def test_unavailable_flavor_in_every_release_says_none():
    found = {"bookworm": _found()["bookworm"]}
    with pytest.raises(ServerError, match=r"mysql-server-core has none"):
        choose(parse_spec("mysql-9.7.4"), found)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("mysql-9.7", "is not FLAVOR-X.Y.Z"),
        ("MySQL 9.7.4", "is not FLAVOR-X.Y.Z"),
        ("", "is not FLAVOR-X.Y.Z"),
        ("mariadb-11.8.9-1", "is not FLAVOR-X.Y.Z"),
        ("percona-8.0.35", "Percona Server is not in Debian's archive"),
        ("postgres-17.1.0", "flavor 'postgres' is not one Debian packages"),
    ],
)
def test_bad_spec(text, expected):
    with pytest.raises(ServerError, match=expected):
        parse_spec(text)


def _candidates(release: str) -> tuple[list[str], dict[str, Package]]:
    names = (FIX / f"{release}-allocator-names.txt").read_text().split()
    return names, {n: Package(n, "1.0-1", n) for n in names}


@pytest.mark.parametrize(
    "release, expected",
    [
        (
            "bookworm",
            {
                "jemalloc": "libjemalloc2",
                "tcmalloc": "libgoogle-perftools4",
                "tcmalloc-minimal": "libtcmalloc-minimal4",
                "mimalloc": "libmimalloc2.0",
                "tbbmalloc": "libtbbmalloc2",
            },
        ),
        (
            "sid",
            {
                "jemalloc": "libjemalloc2",
                "tcmalloc": "libgoogle-perftools4t64",
                "tcmalloc-minimal": "libtcmalloc-minimal4t64",
                "mimalloc": "libmimalloc3",
                "tbbmalloc": "libtbbmalloc2",
            },
        ),
    ],
)
def test_allocator_packages_follow_the_release_names(release, expected):
    names, cands = _candidates(release)
    found, missing = pick_allocator_packages(names, cands)
    assert {a: p.name for a, p in found.items()} == expected
    assert missing == []


def test_allocator_package_missing_is_named_and_newest_soname_wins():
    names, cands = _candidates("trixie")
    names = [n for n in names if not n.startswith("libtbbmalloc")] + ["libmimalloc2.0"]
    cands["libmimalloc2.0"] = Package("libmimalloc2.0", "2.0.9+ds-2", "mimalloc")
    found, missing = pick_allocator_packages(names, cands)
    assert missing == ["tbbmalloc"]
    assert found["mimalloc"].name == "libmimalloc3"
    # a name apt knows only virtually (no candidate stanza) does not count
    found, missing = pick_allocator_packages(["libjemalloc2"], {})
    assert "jemalloc" in missing


def test_host_release_and_order(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    assert archive.host_release(f) == "bookworm"
    assert archive.host_release(tmp_path / "missing") is None
    assert archive.release_order("trixie") == ("trixie", "bookworm", "sid")
    assert archive.release_order("ubuntu-noble") == ORDER


def test_mirror_from_deb822_sources(tmp_path):
    (tmp_path / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
    )
    assert archive.mirror_urls(tmp_path) == "http://mirror.example"
    assert archive.mirror_urls(tmp_path / "none") == archive.DEFAULT_MIRROR
    ix = archive.ReleaseIndex("bookworm", tmp_path / "ix", mirror="http://m")
    assert ix.sources_lines()[2].endswith("http://m/debian-security bookworm-security main")
    with pytest.raises(ServerError, match="unknown Debian release 'jessie'"):
        archive.ReleaseIndex("jessie", tmp_path)

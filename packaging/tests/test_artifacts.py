"""What dist/ holds, read as the installers and engines read it: the platform wheel's
RECORD and tags, the tarball's one top directory, the image's manifest and config, and
one version in all of them."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile

from conftest import dist_file


def test_the_wheel_record_matches_its_files(version):
    wheel = dist_file("overtime_supervisor-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record = archive.read("overtime_supervisor-{}.dist-info/RECORD".format(version)).decode("utf-8")
        listed = set()
        for line in record.splitlines():
            path, digest, size = line.rsplit(",", 2)
            listed.add(path)
            if not digest:
                continue
            data = archive.read(path)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (expected, len(data)), "{}: RECORD is wrong for {}".format(wheel, path)
        assert listed == names, "{}: RECORD and the zip differ: {}".format(wheel, sorted(listed ^ names))
        tags = [line.split(": ", 1)[1] for line in
                archive.read("overtime_supervisor-{}.dist-info/WHEEL".format(version)).decode().splitlines()
                if line.startswith("Tag: ")]
        assert (archive.getinfo("overtime_supervisor-{}.data/scripts/overtime".format(version)).external_attr >> 16) & 0o111, \
            "the binary in the wheel is not executable"
    platforms = wheel[:-len(".whl")].split("-")[-1].split(".")
    assert tags == ["py3-none-" + platform for platform in platforms], "{}: WHEEL's tags {}".format(wheel, tags)


def test_the_tarball_has_one_top_directory(version):
    top = "overtime-{}-linux-x86_64".format(version)
    with tarfile.open(dist_file(top + ".tar.gz")) as archive:
        names = archive.getnames()
    assert {name.split("/")[0] for name in names} == {top}, "more than {}/ at the top: {}".format(top, names[:5])
    for wanted in ("bin/overtime", "share/overtime/python/sitecustomize.py", "LICENSE", "README.md",
                   "overtime_worker-{}-py3-none-any.whl".format(version)):
        assert top + "/" + wanted in names, "the tarball lacks {}/{}".format(top, wanted)


def test_the_image_says_the_version(version):
    path = dist_file("overtime-{}-image.tar".format(version))
    with tarfile.open(path) as archive:
        (manifest,) = json.load(archive.extractfile("manifest.json"))
        config = json.load(archive.extractfile(manifest["Config"]))
        layer = archive.extractfile(manifest["Layers"][0]).read()
    assert "localhost/overtime:" + version in manifest["RepoTags"], manifest["RepoTags"]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/overtime"]
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == version
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_an_output_directory_holding_other_files_is_refused_and_kept(tmp_path):
    """scripts/package replaces its output directory whole: one that holds anything it did
    not write (a user's --out pointing at a directory of theirs) is refused untouched."""
    out = tmp_path / "releases"
    (out / "older").mkdir(parents=True)
    (out / "notes.txt").write_text("keep me")
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "package.py")
    result = subprocess.run([sys.executable, script, "--binary", "/bin/true", "--out", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result
    assert "did not write" in result.stderr and "notes.txt" in result.stderr, result.stderr
    assert (out / "notes.txt").read_text() == "keep me"
    assert (out / "older").is_dir()


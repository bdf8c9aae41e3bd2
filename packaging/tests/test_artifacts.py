"""What dist/ holds, read as the installers and engines read it: the platform wheel's
RECORD and tags, the tarball's one top directory, the image's manifest and config, and
one version in all of them."""

import base64
import hashlib
import json
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

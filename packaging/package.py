"""Writes Overtime's release artifacts into dist/ from a static binary and the checkout
(run by scripts/package, which builds the binary first; docs/install.md describes the
artifacts). Standard library only.

    python3 packaging/package.py --binary PATH [--out DIR]

Everything is made in a directory beside DIR and then takes DIR's place, so DIR holds one
consistent set; with the same checkout, binary and SOURCE_DATE_EPOCH, the bytes are the
same on every run."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from archives import EXECUTABLE, Entry, file_entry, sha256_hex, write_tar_gz, zip_entries
from image_archive import write_image_archive
from platform_wheel import write_platform_wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE_REPOSITORY = "localhost/overtime"


class PackageError(Exception):
    pass


def read(path):
    with open(path, "rb") as f:
        return f.read()


def git(*args):
    """git's answer about the checkout, or "" (no git, or not a git checkout)."""
    try:
        result = subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True)
    except OSError:
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def source_date_epoch():
    """SOURCE_DATE_EPOCH when set, else the commit's time: every time stamp in the artifacts."""
    value = os.environ.get("SOURCE_DATE_EPOCH") or git("log", "-1", "--format=%ct") or "0"
    try:
        return int(value)
    except ValueError:
        raise PackageError("SOURCE_DATE_EPOCH must be whole seconds since 1970, not {!r}".format(value))


def readme_intro():
    """README.md up to its first second-level heading: what Overtime is, for a wheel's page."""
    text = read(os.path.join(ROOT, "README.md")).decode("utf-8")
    cut = text.find("\n## ")
    return (text if cut < 0 else text[:cut]).rstrip() + "\n"


def stripped_binary(binary, work):
    """The binary without its debug information, about half of a release build's size."""
    copy = os.path.join(work, "overtime")
    shutil.copyfile(binary, copy)
    os.chmod(copy, EXECUTABLE)
    if not shutil.which("strip"):
        print("package: no strip on PATH (binutils): the binary goes in with its debug information", file=sys.stderr)
        return read(copy)
    result = subprocess.run(["strip", copy], capture_output=True, text=True)
    if result.returncode != 0:
        raise PackageError("strip {} failed: {}".format(copy, result.stderr.strip()))
    return read(copy)


def build_worker_wheel(version, work, out_dir, python):
    """``pip wheel`` of workers/python, from a copy of it (setuptools writes build/ and
    *.egg-info into the tree it builds; the checkout stays as it was)."""
    source = os.path.join(work, "overtime-worker")
    shutil.copytree(os.path.join(ROOT, "workers", "python"), source,
                    ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__", "*.pyc"))
    shutil.copyfile(os.path.join(ROOT, "VERSION"), os.path.join(source, "VERSION"))
    command = [python, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "--no-input",
               "-w", out_dir, source]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise PackageError("{} failed (status {}):\n{}{}".format(
            " ".join(command), result.returncode, result.stdout, result.stderr))
    wanted = "overtime_worker-{}-py3-none-any.whl".format(version)
    path = os.path.join(out_dir, wanted)
    if not os.path.isfile(path):
        raise PackageError("pip wheel wrote {}, not {}".format(sorted(os.listdir(out_dir)), wanted))
    return path


def bridge_bundle(worker_wheel):
    """The bundled bridge, relative to share/overtime/python: workers/python's
    sitecustomize.py (which the supervisor's PYTHONPATH entry makes Python run) and the
    worker wheel's files in lib/, which that file puts last on sys.path."""
    bundle = [file_entry(os.path.join(ROOT, "workers", "python", "sitecustomize.py"), "sitecustomize.py")]
    return bundle + zip_entries(worker_wheel, "lib")


def tarball_entries(top, binary, bundle, worker_wheel):
    entries = [Entry(top + "/bin/overtime", binary, EXECUTABLE)]
    entries += [Entry(top + "/share/overtime/python/" + item.path, item.data, item.mode) for item in bundle]
    entries.append(file_entry(worker_wheel, top + "/" + os.path.basename(worker_wheel)))
    for name in ("README.md", "LICENSE", "CHANGELOG.md"):
        if os.path.isfile(os.path.join(ROOT, name)):
            entries.append(file_entry(os.path.join(ROOT, name), top + "/" + name))
    docs = os.path.join(ROOT, "docs")
    for name in sorted(os.listdir(docs)):
        if os.path.isfile(os.path.join(docs, name)):
            entries.append(file_entry(os.path.join(docs, name), top + "/docs/" + name))
    return entries


def image_labels(version, commit):
    labels = {
        "org.opencontainers.image.title": "overtime",
        "org.opencontainers.image.description": "The overtime supervisor, a static binary to copy from "
                                                "(COPY --from=... /usr/local/bin/overtime /usr/local/bin/)",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    if commit:
        labels["org.opencontainers.image.revision"] = commit
    source = git("remote", "get-url", "origin")
    if source.startswith("https://"):
        labels["org.opencontainers.image.source"] = source
    return labels


def write_checksums(out_dir):
    """SHA256SUMS as sha256sum writes it (two spaces, text mode), for `sha256sum -c` in DIR."""
    lines = []
    for name in sorted(os.listdir(out_dir)):
        lines.append("{}  {}\n".format(sha256_hex(read(os.path.join(out_dir, name))), name))
    with open(os.path.join(out_dir, "SHA256SUMS"), "w") as f:
        f.writelines(lines)


# What a dist/ of ours holds: the artifacts and their sums.
OURS = re.compile(r"^(SHA256SUMS|overtime-.*-(linux-x86_64\.tar\.gz|image\.tar)|overtime_(supervisor|worker)-.*\.whl)$")


def check_output_directory(out):
    """The output directory is replaced as a whole, so it must be one this script wrote (or
    missing, or empty): a directory holding anything else is never removed."""
    if not os.path.lexists(out):
        return
    if os.path.islink(out) or not os.path.isdir(out):
        raise PackageError("{} is not a directory this script wrote; give --out a new directory".format(out))
    foreign = [name for name in os.listdir(out) if not OURS.match(name)]
    if foreign:
        raise PackageError("{} holds files this script did not write ({}); give --out a new or empty directory"
                           .format(out, ", ".join(sorted(foreign)[:5])))


def package(binary, out, python):
    check_output_directory(out)
    version = read(os.path.join(ROOT, "VERSION")).decode("utf-8").strip()
    if not version:
        raise PackageError("VERSION is empty")
    commit = git("rev-parse", "HEAD")
    # As the binary says it (scripts/build-info): built from files that differ from the commit.
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += "-dirty"
    epoch = source_date_epoch()
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)   # for setuptools' wheel too
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".package-work-", dir=parent)
    staged = tempfile.mkdtemp(prefix=".package-out-", dir=parent)
    try:
        binary_bytes = stripped_binary(binary, work)
        worker_wheel = build_worker_wheel(version, work, staged, python)
        bundle = bridge_bundle(worker_wheel)
        write_platform_wheel(staged, version, binary_bytes, bundle, read(os.path.join(ROOT, "LICENSE")),
                             readme_intro(), epoch)
        top = "overtime-{}-linux-x86_64".format(version)
        write_tar_gz(os.path.join(staged, top + ".tar.gz"), tarball_entries(top, binary_bytes, bundle, worker_wheel),
                     epoch)
        image_files = [Entry("usr/local/bin/overtime", binary_bytes, EXECUTABLE)]
        image_files += [Entry("usr/local/share/overtime/python/" + item.path, item.data, item.mode) for item in bundle]
        write_image_archive(os.path.join(staged, "overtime-{}-image.tar".format(version)), image_files,
                            ["{}:{}".format(IMAGE_REPOSITORY, version), IMAGE_REPOSITORY + ":latest"],
                            image_labels(version, commit), epoch)
        write_checksums(staged)
        os.chmod(staged, 0o755)
        if os.path.isdir(out):
            shutil.rmtree(out)   # only ever one of ours: see check_output_directory
        os.rename(staged, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(staged, ignore_errors=True)
    return version


def main():
    parser = argparse.ArgumentParser(description="Writes Overtime's release artifacts (wheels, tarball, image, SHA256SUMS).")
    parser.add_argument("--binary", required=True, help="the static overtime binary (scripts/build-release)")
    parser.add_argument("--out", default=os.path.join(ROOT, "dist"), help="the output directory (default: dist/)")
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip builds the worker wheel")
    args = parser.parse_args()
    if not os.path.isfile(args.binary) or not os.access(args.binary, os.X_OK):
        print("package: {} is not an executable file".format(args.binary), file=sys.stderr)
        return 2
    try:
        version = package(args.binary, args.out, args.python)
    except PackageError as error:
        print("package: {}".format(error), file=sys.stderr)
        return 1
    with open(os.path.join(args.out, "SHA256SUMS")) as sums:
        for line in sums:
            digest, name = line.split()
            size = os.path.getsize(os.path.join(args.out, name))
            print("{:>12,}  {}  {}".format(size, digest[:16], os.path.join(args.out, name)))
    print("package: overtime {} in {}".format(version, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

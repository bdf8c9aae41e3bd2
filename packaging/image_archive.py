"""The image as a docker-archive (what ``docker save`` writes and ``docker load`` and
``podman load`` read): ``manifest.json``, the config named by its digest, one layer tar.
Written here, so no daemon, engine or registry is needed to make it. The image is
``FROM scratch``: the static binary at /usr/local/bin/overtime and the bundled bridge at
/usr/local/share/overtime/python, made to be copied from and to run as an entrypoint."""

import json
import time

from archives import Entry, sha256_hex, tar_bytes


def image_config(layer_digest, labels, epoch):
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": ["/usr/local/bin/overtime"],
            "Cmd": ["--help"],
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_digest]},
        "history": [{"created": created, "created_by": "scripts/package"}],
    }


def canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def write_image_archive(path, files, repo_tags, labels, epoch):
    """Writes the archive of a one-layer image holding files (entries with paths relative
    to the image's root) under repo_tags, with labels in its config."""
    layer = tar_bytes(files, epoch)
    layer_digest = sha256_hex(layer)
    config = canonical_json(image_config(layer_digest, labels, epoch))
    config_name = sha256_hex(config) + ".json"
    layer_name = layer_digest + "/layer.tar"
    manifest = canonical_json([{"Config": config_name, "RepoTags": list(repo_tags), "Layers": [layer_name]}])
    members = [
        Entry(config_name, config),
        Entry(layer_digest + "/VERSION", b"1.0"),
        Entry(layer_name, layer),
        Entry("manifest.json", manifest),
    ]
    with open(path, "wb") as out:
        out.write(tar_bytes(members, epoch))


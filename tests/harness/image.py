"""The project's Dockerfile, built with buildah (no Docker engine needed) and run from its
root filesystem, read-only, as its numeric user (tests/image/run.sh)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from tests.harness.controlplane import provided, spawn

HERE = Path(__file__).resolve().parent.parent / "image"
PROJECT = HERE.parent.parent
PROVIDE_SCRIPT = HERE / "provide.sh"
RUN_SCRIPT = HERE / "run.sh"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
"""Mounted into the build's RUN steps: pip reaches PyPI through whatever CA this machine
trusts (the base's own bundle may lack it)."""
MAX_SYMLINKS = 40  # as the kernel follows at most


@dataclass(frozen=True)
class Buildah:
    """buildah on its own storage under the test cache, and the images to build from."""

    binary: str
    root: str
    runroot: str
    driver: str
    base_image: str
    kubectl_image: str
    helm_image: str
    sops_image: str

    def __call__(self, *arguments: str) -> str:
        """Runs buildah and returns its stdout (fails with its stderr)."""
        done = subprocess.run(
            [*self.command, *arguments], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"buildah {' '.join(arguments)}: {done.stderr}")
        return done.stdout.strip()

    @property
    def command(self) -> list[str]:
        """buildah on this storage, without a subcommand."""
        storage = ["--root", self.root, "--runroot", self.runroot, "--storage-driver", self.driver]
        return [self.binary, *storage]


def provide_buildah() -> Buildah:
    found = {name: str(path) for name, path in provided(PROVIDE_SCRIPT).items()}
    return Buildah(
        found["BUILDAH"],
        found["BUILDAH_ROOT"],
        found["BUILDAH_RUNROOT"],
        found["BUILDAH_DRIVER"],
        found["BASE_IMAGE"],
        found["KUBECTL_IMAGE"],
        found["HELM_IMAGE"],
        found["SOPS_IMAGE"],
    )


@dataclass(frozen=True)
class Image:
    buildah: Buildah
    name: str

    def config(self) -> dict[str, Any]:
        """The OCI image configuration: User, Env, Entrypoint, Cmd, Labels, WorkingDir."""
        inspected = json.loads(self.buildah("inspect", "--type", "image", self.name))
        config: dict[str, Any] = inspected["OCIv1"]["config"]
        return config

    def run_confined(
        self, files: Mapping[str, str], *command: str, seccomp: Path
    ) -> subprocess.CompletedProcess[str]:
        """`command` run to its end by `buildah run` as the image's user, under the seccomp
        profile `seccomp` (as a runtime applies a Pod's), in a fresh working container
        holding `files` (container path -> text, readable by all)."""
        profile = f"seccomp={seccomp}"
        identity = self.buildah(
            "from", "--quiet", "--pull=never", "--security-opt", profile, self.name
        )
        try:
            rootfs = Path(self.buildah("mount", identity))
            for path, text in files.items():
                target = inside(rootfs, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                target.chmod(0o644)
            user = ["--user", self.config()["User"]]
            run = [*self.buildah.command, "run", "--isolation", "chroot", *user, identity, "--"]
            return subprocess.run(
                [*run, *command], capture_output=True, text=True, timeout=120, check=False
            )
        finally:
            self.buildah("rm", identity)

    @contextmanager
    def container(self) -> Iterator[Container]:
        """A fresh working container of the image (its own writable layer), removed after."""
        identity = self.buildah("from", "--quiet", "--pull=never", self.name)
        container = Container(self, identity, Path(self.buildah("mount", identity)))
        try:
            yield container
        finally:
            container.kill_all()
            self.buildah("rm", identity)


def build_image(buildah: Buildah, name: str, log_file: Path) -> Image:
    """Builds the Dockerfile as `name`, reusing every unchanged step of earlier builds, and
    drops what they left that nothing uses any more (with vfs, each step is a full copy)."""
    with log_file.open("wb") as log, _locked(Path(buildah.root).parent / ".build-lock"):
        # The build stage gets a name too: otherwise its steps, the installed dependencies
        # among them, belong to no image and the prune below would delete them.
        _build(buildah, log, "--target", "build", "--tag", f"{name}-build")
        _build(buildah, log, "--tag", name)
        for stage_image in (buildah.kubectl_image, buildah.helm_image, buildah.sops_image):
            leftovers = buildah("containers", "--quiet", "--filter", f"ancestor={stage_image}")
            if leftovers:  # buildah 1.28 keeps a container for a stage without instructions
                buildah("rm", *leftovers.split())
        _remove_untagged_containers(buildah)
        buildah("rmi", "--prune")
    return Image(buildah, name)


def _remove_untagged_containers(buildah: Buildah) -> None:
    """Containers of an image no tag names any more: what a run killed in a build (its
    steps' working containers) or in a test (the image's, since built again) left behind.
    They would keep the prune below from removing their images, and fail it. None is in
    use: no build runs beside this one (the lock), and a test's container is of the image
    its run built, which keeps its tag."""
    listed = buildah("containers", "--format", "{{.ContainerID}} {{.ImageName}}")
    untagged = [line.split()[0] for line in listed.splitlines() if len(line.split()) == 1]
    if untagged:
        buildah("rm", *untagged)


def _build(buildah: Buildah, log: BinaryIO, *arguments: str) -> None:
    argv = [
        *buildah.command,
        *("bud", "--isolation", "chroot", "--layers", "--pull=never", *arguments),
        *("--build-arg", f"BASE={buildah.base_image}"),
        *("--build-arg", f"KUBECTL_IMAGE={buildah.kubectl_image}"),
        *("--build-arg", f"HELM_IMAGE={buildah.helm_image}"),
        *("--build-arg", f"SOPS_IMAGE={buildah.sops_image}"),
        *("--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"),
        *("--file", str(PROJECT / "Dockerfile"), str(PROJECT)),
    ]
    log.flush()
    done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = Path(log.name).read_text(errors="replace")[-6000:]
        raise AssertionError(f"building the image failed ({done.returncode}):\n{tail}")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build at a time: a prune would delete the untagged steps of a build in flight."""
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Volume:
    source: Path
    target: str
    read_only: bool = False


@dataclass
class Container:
    """Runs processes in the image's root filesystem; `kill_all` ends those still running.
    (The kernel's parent-death signal does not reach them: it is cleared when run.sh's
    chroot changes the user, so killing `unshare` alone would leave them running.)"""

    image: Image
    identity: str
    rootfs: Path
    started: list[subprocess.Popen[Any]] = field(default_factory=list)

    def start(
        self,
        log_file: Path,
        volumes: tuple[Volume, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Starts the image's entrypoint and cmd as a Pod would (see `argv`), its stdout and
        stderr into `log_file`. Its host pid is that of the returned process's one child."""
        config = self.image.config()
        command = [*config.get("Entrypoint", []), *config.get("Cmd", [])]
        process = spawn(self.argv(command, volumes, env), log_file)
        self.started.append(process)
        return process

    def run(
        self, *command: str, user: str = "", volumes: tuple[Volume, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        """Runs `command` to its end (see `argv`) and returns what it printed."""
        argv = self.argv(list(command), volumes, user=user)
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started.append(process)
        out, err = process.communicate(timeout=120)
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def kill_all(self) -> None:
        """SIGKILL to the PID 1 of every process still running, which ends its namespace."""
        for process in self.started:
            if process.poll() is None:
                with contextlib.suppress(AssertionError, FileNotFoundError, ProcessLookupError):
                    os.kill(main_pid(process), signal.SIGKILL)
                process.kill()
                process.wait()

    def argv(
        self,
        command: list[str],
        volumes: tuple[Volume, ...] = (),
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> list[str]:
        """`command` in fresh mount and PID namespaces (run.sh): as the image's user (or
        `user`), with the image's environment plus `env`, the root filesystem read-only."""
        config = self.image.config()
        assert config.get("WorkingDir", "") in ("", "/"), "run.sh always starts in /"
        variables = {**dict(v.split("=", 1) for v in config.get("Env", [])), **(env or {})}
        options = [f"-e{name}={value}" for name, value in variables.items()]
        options += [f"-v{self._mount_point(volume)}" for volume in volumes]
        namespaces = ["unshare", "--mount", "--pid", "--fork", "--kill-child"]
        namespaces += ["--propagation", "private"]
        script = [str(RUN_SCRIPT), str(self.rootfs), user or config["User"]]
        return [*namespaces, *script, *options, "--", *command]

    def _mount_point(self, volume: Volume) -> str:
        """SOURCE:TARGET[:ro] for run.sh, TARGET made in the container's own layer while it is
        still writable, as a runtime does, and resolved as the container sees it."""
        target = inside(self.rootfs, volume.target)
        if volume.source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        return f"{volume.source}:{target}{':ro' if volume.read_only else ''}"


def inside(root: Path, path: str) -> Path:
    """The host path of the container's `path` under `root`, its symlinks followed the way
    the container sees them: an absolute link leads into `root`, never out of it."""
    resolved = PurePosixPath("/")
    pending = list(PurePosixPath(path).parts[1:])
    links = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            resolved = resolved.parent
            continue
        candidate = root / (resolved / part).relative_to("/")
        if not candidate.is_symlink():
            resolved = resolved / part
            continue
        links += 1
        assert links <= MAX_SYMLINKS, f"too many symbolic links in {path}"
        link = PurePosixPath(candidate.readlink())
        resolved = PurePosixPath("/") if link.is_absolute() else resolved
        pending = [*link.parts[1 if link.is_absolute() else 0 :], *pending]
    return root / resolved.relative_to("/")


def main_pid(unshare: subprocess.Popen[Any]) -> int:
    """The host pid of the container's PID 1: the one child `unshare --fork` has."""
    children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
    assert len(children) == 1, f"unshare has children {children}"
    return int(children[0])

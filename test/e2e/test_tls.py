"""TLS, mutual TLS and bearer tokens between gpuctl and gpuctld.

A throwaway CA, a server certificate (SAN 127.0.0.1 and localhost) and a
client certificate are made with the openssl command for the session.
"""

import os
import subprocess

import pytest

from e2e_util import parse_processes, wait_until


def _openssl(cwd, *args):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(cwd, name, ca, extensions):
    _openssl(cwd, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(cwd, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


def _ca(cwd, name):
    _openssl(cwd, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "1", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.pem")


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _signed(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n")
    _signed(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    # A second CA: a client certificate it signed must be refused.
    _ca(d, "rogue")
    _signed(d, "intruder", "rogue", "extendedKeyUsage=clientAuth\n")
    return {name: str(d / name) for name in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key",
             "intruder.pem", "intruder.key")}


def _token_file(workdir, name, token, mode=0o600):
    path = workdir / name
    path.write_text(token + "\n")
    os.chmod(path, mode)
    return str(path)


def _tls_daemon_args(pki, mutual=False):
    args = ["--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"]]
    if mutual:
        args += ["--tls-client-ca", pki["ca.pem"]]
    return args


def test_tls_trace_works_and_a_plaintext_cli_is_told_why_it_fails(
        start_daemon, cli_for, start_workload, pki):
    daemon = start_daemon(*_tls_daemon_args(pki))
    cli = cli_for(daemon)
    workload = start_workload(job=5, rank=0, world_size=1)
    tls = ("--tls-ca", pki["ca.pem"])

    def attached():
        listed = cli.run("ps", "--json", *tls)
        assert listed.returncode == 0, listed.stderr
        return workload.pid in {p["pid"] for p in parse_processes(listed.stdout)}
    wait_until(attached, what="workload attached, listed over TLS")

    result, trace = cli.trace("--job", "5", "--duration", "300ms", *tls)
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None and len(trace.results) == 1, result.stdout + result.stderr
    assert trace.results[0]["status"] == "CAPTURE_STATUS_OK", trace.results

    plain = cli.run("status")
    assert plain.returncode == 4, plain.stdout + plain.stderr
    assert "cannot reach gpuctld" in plain.stderr
    assert "gpuctld may require TLS" in plain.stderr, plain.stderr

    # The server name is checked: the certificate does not name "elsewhere".
    wrong_name = cli.run("status", *tls, "--tls-server-name", "elsewhere")
    assert wrong_name.returncode == 4, wrong_name.stderr
    assert "TLS handshake failed?" in wrong_name.stderr, wrong_name.stderr
    assert cli.run("status", *tls, "--tls-server-name", "localhost").returncode == 0


def test_mutual_tls_requires_a_client_certificate_from_the_ca(start_daemon, cli_for, pki):
    daemon = start_daemon(*_tls_daemon_args(pki, mutual=True))
    cli = cli_for(daemon)

    anonymous = cli.run("status", "--tls-ca", pki["ca.pem"])
    assert anonymous.returncode == 4, anonymous.stdout + anonymous.stderr
    assert "TLS handshake failed?" in anonymous.stderr, anonymous.stderr

    intruder = cli.run("status", "--tls-ca", pki["ca.pem"], "--tls-cert", pki["intruder.pem"],
                       "--tls-key", pki["intruder.key"])
    assert intruder.returncode == 4, intruder.stderr

    ok = cli.run("status", "--tls-ca", pki["ca.pem"], "--tls-cert", pki["client.pem"],
                 "--tls-key", pki["client.key"])
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # The same settings from the environment, for every command.
    env = dict(os.environ, GPUCTL_TLS_CA=pki["ca.pem"], GPUCTL_TLS_CERT=pki["client.pem"],
               GPUCTL_TLS_KEY=pki["client.key"])
    for command in (("status",), ("ps",), ("traces",)):
        from_env = subprocess.run(cli.args(*command), env=env, capture_output=True, text=True,
                                  timeout=60, stdin=subprocess.DEVNULL)
        assert from_env.returncode == 0, (command, from_env.stderr)


def test_bearer_token_is_required_and_checked(start_daemon, cli_for, workdir):
    token = _token_file(workdir, "daemon.token", "s3cr3t-Token")
    daemon = start_daemon("--auth-token-file", token)
    cli = cli_for(daemon)

    missing = cli.run("ps")
    assert missing.returncode == 4, missing.stdout + missing.stderr
    assert "UNAUTHENTICATED" in missing.stderr, missing.stderr

    wrong = cli.run("status", "--token-file", _token_file(workdir, "wrong", "guessed-Token"))
    assert wrong.returncode == 4, wrong.stderr
    assert "UNAUTHENTICATED" in wrong.stderr
    assert "guessed-Token" not in wrong.stderr and "s3cr3t" not in wrong.stderr

    right = cli.run("status", "--token-file", _token_file(workdir, "right", "s3cr3t-Token"))
    assert right.returncode == 0, right.stdout + right.stderr
    env = dict(os.environ, GPUCTL_TOKEN_FILE=token)
    from_env = subprocess.run(cli.args("ps"), env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    assert from_env.returncode == 0, from_env.stderr


def _run_gpuctld(build_dir, workdir, *args):
    ready = workdir / "open.ready"
    cmd = [str(build_dir / "bin/gpuctld"), "--socket", str(workdir / "open.sock"),
           "--store", str(workdir / "open-store"), "--ready-file", str(ready), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL), ready


def test_non_loopback_listen_needs_tls_or_insecure(build_dir, workdir, pki):
    refused, _ = _run_gpuctld(build_dir, workdir, "--listen", "0.0.0.0:0")
    out, _ = refused.communicate(timeout=30)
    assert refused.returncode == 2, out
    assert "refusing to serve 0.0.0.0:0 without transport security" in out

    served, ready = _run_gpuctld(build_dir, workdir, "--listen", "0.0.0.0:0",
                                 *_tls_daemon_args(pki))
    try:
        def bound():
            assert served.poll() is None, served.stdout.read()
            return ready.exists() and ready.read_text().strip()
        address = wait_until(bound, what="gpuctld ready on 0.0.0.0")
        assert address.startswith("0.0.0.0:")
    finally:
        served.terminate()
        out, _ = served.communicate(timeout=30)
    assert served.returncode == 0, out


def test_bad_tls_or_token_files_stop_the_daemon_at_startup(build_dir, workdir, pki):
    cases = [
        (["--tls-cert", pki["server.pem"], "--tls-key", pki["client.key"]],
         "is not the private key of the certificate"),
        (["--tls-cert", str(workdir / "absent.pem"), "--tls-key", pki["server.key"]],
         "cannot read --tls-cert"),
        (["--auth-token-file", _token_file(workdir, "loose", "tok", 0o644)], "chmod 600"),
    ]
    for args, message in cases:
        proc, _ = _run_gpuctld(build_dir, workdir, "--listen", "127.0.0.1:0", *args)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 1, (args, out)
        assert message in out, (args, out)


def test_a_scoped_token_reaches_only_its_jobs(start_daemon, cli_for, start_workload, workdir):
    """auth.tokens: a token scoped to one job and namespace sees and traces
    only processes inside its scope; the unscoped token still sees all."""
    admin = _token_file(workdir, "admin.token", "admin-Token")
    team = _token_file(workdir, "team.token", "team-Token")
    config = workdir / "gpuctld.yaml"
    config.write_text(
        "auth:\n"
        f"  token_file: {admin}\n"
        "  tokens:\n"
        "    - name: team-a\n"
        f"      token_file: {team}\n"
        "      jobs: [job-a]\n"
        "      namespaces: [ns-a]\n")
    daemon = start_daemon("--config", str(config))
    cli = cli_for(daemon)
    mine = start_workload(job="job-a", rank=0, world_size=1, env={"POD_NAMESPACE": "ns-a"})
    # Claims the job but not the namespace; and another job altogether.
    stray = start_workload(job="job-a", rank=1, world_size=2, env={"POD_NAMESPACE": "ns-b"})
    other = start_workload(job="job-b", rank=0, world_size=1, env={"POD_NAMESPACE": "ns-a"})

    def ps(token):
        result = cli.run("ps", "--json", "--token-file", token)
        assert result.returncode == 0, result.stderr
        return {p["pid"] for p in parse_processes(result.stdout)}

    everyone = {mine.pid, stray.pid, other.pid}
    wait_until(lambda: everyone <= ps(admin), what="every workload attached")
    assert ps(team) == {mine.pid}

    refused = cli.run("trace", "--job", "job-b", "--label", "k8s.namespace=ns-a",
                      "--duration", "200ms", "--token-file", team)
    assert refused.returncode != 0
    assert "refused the request" in refused.stderr, refused.stderr
    assert ('token "team-a" (job job-a; namespace ns-a) may not trace this selection: '
            'job "job-b" is not one of its') in refused.stderr, refused.stderr
    no_namespace = cli.run("trace", "--job", "job-a", "--duration", "200ms", "--token-file", team)
    assert no_namespace.returncode != 0
    assert "k8s.namespace" in no_namespace.stderr, no_namespace.stderr

    out = workdir / "scoped-dl"
    ok = cli.run("trace", "--job", "job-a", "--label", "k8s.namespace=ns-a", "--duration",
                 "200ms", "--token-file", team, "-o", str(out), timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"{mine.pid}" in ok.stdout and f"{stray.pid}" not in ok.stdout, ok.stdout
    # The daemon logged who asked, by token name.
    wait_until(lambda: 'msg="trace requested"' in daemon.log()
               and 'with token \\"team-a\\"' in daemon.log(),
               what="the trace request logged with the token's name")

    # The scoped token lists and fetches the trace it took, and not one it
    # did not (the unscoped token's trace of job-b).
    trace_id = next(p.name for p in out.iterdir() if p.is_dir())
    theirs = cli.run("trace", "--job", "job-b", "--duration", "200ms", "--token-file", admin,
                     "-o", str(workdir / "admin-dl"), timeout=120)
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    listed = cli.run("traces", "--json", "--token-file", team)
    assert listed.returncode == 0, listed.stderr
    assert trace_id in listed.stdout
    assert "job-b" not in listed.stdout, listed.stdout
    everything = cli.run("traces", "--json", "--token-file", admin)
    assert "job-b" in everything.stdout
    got = cli.run("get", trace_id, "-o", str(workdir / "team-get"), "--token-file", team)
    assert got.returncode == 0, got.stdout + got.stderr

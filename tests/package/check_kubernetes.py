#!/usr/bin/env python3
"""examples/kubernetes: the manifests' shape, since no cluster runs here.

Parses every document, then checks what a cluster would otherwise catch at apply or run
time: required fields per kind, selectors that match their pods, probes and Service
ports that name ports the container has, ConfigMaps the volumes mount, Envoy's rate limit
cluster and domain pointing at floodgate's Service and RLS config, and `floodgate config
check` accepting the floodgate config and RLS directory as they would be mounted.
Usage: check_kubernetes.py FLOODGATE_BINARY EXAMPLES_DIR WORK_DIR
"""
import pathlib
import shutil
import subprocess
import sys

import yaml

binary, examples, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
errors = []


def need(condition, what):
    if not condition:
        errors.append(what)
    return condition


docs = []
for path in sorted(examples.glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is not None:
            docs.append((path.name, doc))
by_kind = {}
for name, doc in docs:
    for field in ("apiVersion", "kind", "metadata"):
        need(field in doc, f"{name}: a document without {field}")
    need("name" in doc.get("metadata", {}), f"{name}: a {doc.get('kind')} without a name")
    by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc

config_maps = by_kind.get("ConfigMap", {})
deployments = by_kind.get("Deployment", {})
services = by_kind.get("Service", {})
for kind, names in (("ConfigMap", ["floodgate-config", "floodgate-ratelimit", "envoy-config"]),
                    ("Deployment", ["floodgate", "envoy"]), ("Service", ["floodgate", "envoy"])):
    for name in names:
        need(name in by_kind.get(kind, {}), f"no {kind} {name}")
if errors:
    sys.exit("FAIL:\n" + "\n".join(errors))


def subset(small, big):
    return bool(small) and all(big.get(k) == v for k, v in small.items())


def ports_of(container):
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


for name, deployment in deployments.items():
    need(deployment["apiVersion"] == "apps/v1", f"Deployment {name}: apiVersion apps/v1")
    spec = deployment["spec"]
    pod = spec["template"]
    need(subset(spec["selector"]["matchLabels"], pod["metadata"]["labels"]),
         f"Deployment {name}: the selector does not match the pod's labels")
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    for volume in volumes.values():
        if "configMap" in volume:
            need(volume["configMap"]["name"] in config_maps,
                 f"Deployment {name}: volume {volume['name']} mounts a missing ConfigMap")
    for container in pod["spec"]["containers"]:
        need(container.get("image"), f"Deployment {name}: a container without an image")
        for mount in container.get("volumeMounts", []):
            need(mount["name"] in volumes, f"Deployment {name}: mount {mount['name']} has no volume")

# floodgate: the image's user, probes on the ports it serves, read-only and unprivileged.
floodgate_pod = deployments["floodgate"]["spec"]["template"]["spec"]
floodgate = floodgate_pod["containers"][0]
ports = ports_of(floodgate)
need(floodgate["image"].startswith("floodgate:"), "the floodgate container runs another image")
need(floodgate["args"][0] == "serve", "the floodgate container does not run serve")
readiness = floodgate.get("readinessProbe", {})
need(readiness.get("grpc", {}).get("port") == ports.get("grpc"),
     "floodgate's readiness is not gRPC health on its grpc port")
liveness = floodgate.get("livenessProbe", {}).get("httpGet", {})
need(liveness.get("path") == "/healthz" and liveness.get("port") in ("http", ports.get("http")),
     "floodgate's liveness is not /healthz on its http port")
pod_security = floodgate_pod.get("securityContext", {})
need(pod_security.get("runAsNonRoot") is True and pod_security.get("runAsUser") == 65532,
     "floodgate does not run as the image's non-root user 65532")
security = floodgate.get("securityContext", {})
need(security.get("allowPrivilegeEscalation") is False and security.get("readOnlyRootFilesystem"),
     "floodgate's container may escalate or write its root filesystem")

# Services: select the pods, target ports the container has.
for name, service in services.items():
    pod = deployments[name]["spec"]["template"]
    need(subset(service["spec"]["selector"], pod["metadata"]["labels"]),
         f"Service {name}: the selector matches no pod of Deployment {name}")
    container_ports = ports_of(pod["spec"]["containers"][0])
    for port in service["spec"]["ports"]:
        need(port["targetPort"] in container_ports or port["targetPort"] in container_ports.values(),
             f"Service {name}: targetPort {port['targetPort']} is no container port")
grpc_service_port = {p["name"]: p["port"] for p in services["floodgate"]["spec"]["ports"]}["grpc"]

# Envoy asks floodgate's Service on its gRPC port over HTTP/2, for the domain floodgate has.
envoy = yaml.safe_load(config_maps["envoy-config"]["data"]["envoy.yaml"])
clusters = {c["name"]: c for c in envoy["static_resources"]["clusters"]}
filters = envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
http_filters = filters["typed_config"]["http_filters"]
ratelimit = next(f["typed_config"] for f in http_filters if f["name"] == "envoy.filters.http.ratelimit")
cluster_name = ratelimit["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]
if need(cluster_name in clusters, f"Envoy's rate limit cluster {cluster_name} is not defined"):
    cluster = clusters[cluster_name]
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    socket = address["socket_address"]
    need(socket["address"] == "floodgate" and socket["port_value"] == grpc_service_port,
         f"Envoy asks {socket}, not floodgate's Service on {grpc_service_port}")
    need("http2_protocol_options" in str(cluster), "Envoy's floodgate cluster is not HTTP/2")
rls_config = yaml.safe_load(config_maps["floodgate-ratelimit"]["data"]["config.yaml"])
need(ratelimit["domain"] == rls_config["domain"],
     f"Envoy asks for domain {ratelimit['domain']}, floodgate's config has {rls_config['domain']}")

# The configs as the pod mounts them, through floodgate's own check.
mounts = {m["name"]: m["mountPath"] for m in floodgate["volumeMounts"]}
config_file = pathlib.PurePosixPath(floodgate["args"][floodgate["args"].index("--config") + 1])
need(str(config_file.parent) == mounts["config"], "--config is not in the config mount")
floodgate_config = yaml.safe_load(config_maps["floodgate-config"]["data"][config_file.name])
need(mounts["ratelimit"] == floodgate_config["rls"]["runtime_root"] + "/config",
     "the RLS ConfigMap is not mounted at <rls.runtime_root>/config")
shutil.rmtree(work, ignore_errors=True)
(work / "ratelimit" / "config").mkdir(parents=True)
(work / config_file.name).write_text(config_maps["floodgate-config"]["data"][config_file.name])
for key, text in config_maps["floodgate-ratelimit"]["data"].items():
    (work / "ratelimit" / "config" / key).write_text(text)
check = subprocess.run([binary, "config", "check", str(work / config_file.name),
                        "--runtime-root", str(work / "ratelimit")],
                       capture_output=True, text=True, check=False)
need(check.returncode == 0, f"floodgate config check refuses the example: {check.stderr}")

if errors:
    sys.exit("FAIL:\n" + "\n".join(errors))
print(f"ok: {len(docs)} documents; {check.stdout.strip()}")

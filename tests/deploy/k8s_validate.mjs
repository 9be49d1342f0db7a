// Validates deploy/k8s against the Kubernetes schemas (npm kubernetes-models), and checks what
// issue 19 asks of the manifests. Usage: node k8s_validate.mjs DEPLOY_K8S_DIR
// Prints one line per object and exits 1 on the first problem found in any of them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse } from "yaml";

const dir = process.argv[2];
const problems = [];
const objects = [];

async function modelFor(apiVersion, kind) {
  // "apps/v1" -> kubernetes-models/apps/v1/Kind; core "v1" -> kubernetes-models/v1/Kind.
  const module = await import(`kubernetes-models/${apiVersion}/${kind}`);
  return module[kind];
}

function check(condition, what) {
  if (!condition) problems.push(what);
}

const kustomization = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8"));
check(kustomization.kind === "Kustomization", "kustomization.yaml: kind is not Kustomization");
check(kustomization.namespace === "tessel", "kustomization.yaml: namespace is not tessel");
for (const file of kustomization.resources) {
  const docs = parseAllDocuments(readFileSync(join(dir, file), "utf8"));
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      problems.push(`${file}: YAML: ${doc.errors[0].message}`);
      continue;
    }
    const object = doc.toJS();
    if (object === null) continue;
    const name = `${file}: ${object.kind}/${object.metadata?.name}`;
    try {
      const Model = await modelFor(object.apiVersion, object.kind);
      new Model(object).validate();
      console.log(`valid: ${name} (${object.apiVersion})`);
    } catch (error) {
      problems.push(`${name}: ${String(error.message).slice(0, 400)}`);
    }
    objects.push({ file, object });
  }
}

const byKind = (kind) => objects.filter((o) => o.object.kind === kind).map((o) => o.object);
const [statefulSet] = byKind("StatefulSet");
const [deployment] = byKind("Deployment");
check(statefulSet, "no StatefulSet for the server");
check(deployment, "no Deployment for the workers");
check(byKind("PodDisruptionBudget").length === 1, "no PodDisruptionBudget");
check(byKind("Service").length >= 1, "no Service");
check(byKind("Secret").length >= 1, "no Secret for the tokens");
if (statefulSet) {
  check(statefulSet.spec.volumeClaimTemplates?.length >= 1, "the server has no PersistentVolumeClaim");
  const server = statefulSet.spec.template.spec.containers[0];
  check(server.readinessProbe?.httpGet?.path === "/readyz" || server.readinessProbe?.grpc,
        "the server's readiness is neither /readyz nor the gRPC health probe");
  check(server.livenessProbe, "the server has no liveness probe");
  const service = byKind("Service").find((s) => s.metadata.name === statefulSet.spec.serviceName);
  check(service, "no Service named by the StatefulSet's serviceName");
  const ports = new Set((service?.spec.ports ?? []).map((p) => p.port));
  check(ports.has(7878) && ports.has(8080), "the Service lacks the gRPC (7878) or HTTP (8080) port");
  const volumes = statefulSet.spec.template.spec.volumes ?? [];
  check(volumes.some((v) => v.secret?.secretName === "tessel-tls"), "the server has no TLS Secret");
}
for (const workload of [statefulSet, deployment].filter(Boolean)) {
  const pod = workload.spec.template.spec;
  check(pod.securityContext?.runAsNonRoot === true, `${workload.metadata.name}: may run as root`);
  for (const container of pod.containers) {
    const where = `${workload.metadata.name}/${container.name}`;
    check(container.resources?.requests?.cpu && container.resources?.requests?.memory,
          `${where}: no resource requests`);
    check(container.resources?.limits?.cpu && container.resources?.limits?.memory,
          `${where}: no resource limits`);
    check(container.securityContext?.readOnlyRootFilesystem === true,
          `${where}: the root filesystem is writable`);
    check(container.securityContext?.allowPrivilegeEscalation === false,
          `${where}: privilege escalation allowed`);
  }
}

// The check must be able to fail: a Deployment with a string for replicas is refused.
try {
  const Model = await modelFor("apps/v1", "Deployment");
  new Model({ ...deployment, spec: { ...deployment.spec, replicas: "three" } }).validate();
  problems.push("the schema accepted replicas: \"three\"; this validation proves nothing");
} catch {
  // expected
}

if (problems.length > 0) {
  for (const problem of problems) console.log(`FAIL: ${problem}`);
  process.exit(1);
}
console.log(`PASS: ${objects.length} objects valid against the Kubernetes schemas`);

// The `tessel` Python module: libtessel's lookup for Python (e.g. PyTorch-side code choosing tile
// configs). Errors raise ValueError (bad input), LookupError (nothing known), PermissionError (the
// server refused the token: UNAUTHENTICATED or PERMISSION_DENIED) or RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "client/lookup.h"
#include "schema/key.h"

namespace py = pybind11;

namespace {

[[noreturn]] void Raise(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      throw py::value_error(message);
    case absl::StatusCode::kNotFound:
      throw py::key_error(message);
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      PyErr_SetString(PyExc_PermissionError, message.c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(message);
  }
}

// Accepts {"M": 4096, ...} or "M=4096,N=4096,K=4096".
tessel::Dims ToDims(const py::object& shape) {
  if (py::isinstance<py::str>(shape)) {
    auto dims = tessel::Dims::Parse(shape.cast<std::string>());
    if (!dims.ok()) Raise(dims.status());
    return *dims;
  }
  tessel::Dims dims;
  for (const auto& [name, value] : shape.cast<std::map<std::string, int64_t>>()) {
    if (value <= 0) throw py::value_error("dim " + name + " must be positive");
    dims.Set(name, value);
  }
  if (dims.empty()) throw py::value_error("shape has no dims");
  return dims;
}

py::dict ToDict(const tessel::client::LookupResult& r) {
  py::dict out;
  out["config"] = r.config;
  py::dict params;
  auto config = tessel::Config::Parse(r.config);
  if (config.ok()) {
    for (const auto& [name, value] : config->items()) {
      auto number = config->GetInt(name);
      if (number.ok()) {
        params[py::str(name)] = *number;
      } else {
        params[py::str(name)] = value;
      }
    }
  }
  out["params"] = params;
  out["match"] = r.match;
  out["time_ns"] = r.time_ns;
  out["stale"] = r.stale;
  out["snapshot"] = r.snapshot_id;
  out["job_id"] = r.job_id;
  out["tuned_dims"] = r.tuned_dims;
  out["tuned_target"] = r.tuned_target;
  out["source"] = r.source;
  out["adapted"] = r.adapted;
  out["adaptation"] = r.adaptation;
  return out;
}

class PyLookup {
 public:
  PyLookup(const std::string& snapshot, const std::string& server, const std::string& cache,
           int64_t pin_snapshot, int timeout_ms, const std::string& token,
           const std::string& tls_ca, const std::string& tls_cert, const std::string& tls_key) {
    tessel::client::LookupOptions options;
    options.snapshot_path = snapshot;
    options.server_address = server;
    options.cache_path = cache;
    options.pin_snapshot = pin_snapshot;
    options.server_timeout_ms = timeout_ms;
    options.token = token;
    options.tls_ca_file = tls_ca;
    options.tls_cert_file = tls_cert;
    options.tls_key_file = tls_key;
    auto lookup = tessel::client::Lookup::Create(options);
    if (!lookup.ok()) Raise(lookup.status());
    lookup_ = *std::move(lookup);
  }

  py::dict Find(const std::string& kernel, const py::object& shape, const std::string& dtype,
                const std::string& target) {
    tessel::Dims dims = ToDims(shape);
    absl::StatusOr<tessel::client::LookupResult> found;
    {
      py::gil_scoped_release release;  // a server call may block
      found = lookup_->Find(kernel, dims, dtype, target);
    }
    if (!found.ok()) Raise(found.status());
    return ToDict(*found);
  }

 private:
  std::unique_ptr<tessel::client::Lookup> lookup_;
};

}  // namespace

PYBIND11_MODULE(_tessel, m) {
  m.doc() = "tessel: look up tuned ML kernel configs (libtessel)";
  py::class_<PyLookup>(m, "Lookup",
                       "Looks configs up in a snapshot file and/or a tessel-server, with an "
                       "in-process cache and graded fallback (exact, nearest, other_target, "
                       "default).")
      // The credentials are keyword-only, so that no positional call passes a secret by mistake.
      .def(py::init<const std::string&, const std::string&, const std::string&, int64_t, int,
                    const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           py::arg("snapshot") = "", py::arg("server") = "", py::arg("cache") = "",
           py::arg("pin_snapshot") = 0, py::arg("timeout_ms") = 500, py::kw_only(),
           py::arg("token") = "", py::arg("tls_ca") = "", py::arg("tls_cert") = "",
           py::arg("tls_key") = "",
           "token: the token itself (else the file named by $TESSEL_TOKEN_FILE, if set); tls_ca: "
           "PEM roots that verify the server (TLS); tls_cert, tls_key: a client certificate for "
           "a server that requires one (mutual TLS).")
      .def("find", &PyLookup::Find, py::arg("kernel"), py::arg("shape"), py::arg("dtype") = "bf16",
           py::arg("target") = "snc2",
           "Returns a dict: config, params, match, time_ns, stale, snapshot, job_id, tuned_dims, "
           "tuned_target, source, adapted, adaptation.");
}

#include "daemon/rpc/transport_security.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kMaxPemFileBytes = size_t{1} << 20;

// OpenSSL's reason for the last failure, cleared from its error queue.
std::string TakeOpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

absl::StatusOr<X509Ptr> ParseFirstCert(const std::string& what, const std::string& path,
                                       const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " holds no PEM certificate: ", TakeOpenSslError()));
  }
  return cert;
}

absl::Status CheckKeyMatches(const ServerTlsFiles& files, const std::string& cert_pem,
                             const std::string& key_pem) {
  absl::StatusOr<X509Ptr> cert = ParseFirstCert("--tls-cert", files.cert, cert_pem);
  if (!cert.ok()) return cert.status();
  BioPtr bio = MemoryBio(key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", files.key, " holds no unencrypted PEM private key: ", TakeOpenSslError()));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", files.key, " is not the private key of the certificate in ", files.cert));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  }
  std::string content = std::move(text).str();
  if (content.size() > kMaxPemFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is larger than ", kMaxPemFileBytes, " bytes"));
  }
  return content;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadSmallFile("--tls-cert", files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadSmallFile("--tls-key", files.key);
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckKeyMatches(files, *cert, *key); !s.ok()) return s;

  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadSmallFile("--tls-client-ca", files.client_ca);
    if (!ca.ok()) return ca.status();
    if (absl::StatusOr<X509Ptr> parsed = ParseFirstCert("--tls-client-ca", files.client_ca, *ca);
        !parsed.ok()) {
      return parsed.status();
    }
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace gpuctl::daemon

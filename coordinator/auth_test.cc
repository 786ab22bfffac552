#include "coordinator/auth.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

const std::string kToken = "5f0c3a9d2b7e41c8a6f1d0e9b3c7a2f4";

CallCredentials Bearer(const std::string& header) {
  CallCredentials c;
  c.authorization.push_back(header);
  return c;
}

CallCredentials Certificate(std::vector<std::string> uris) {
  CallCredentials c;
  c.client_certificate = true;
  c.certificate_uris = std::move(uris);
  return c;
}

TEST(AuthTest, OpenAllowsEverything) {
  const Auth open = Auth::Open();
  EXPECT_TRUE(open.open());
  EXPECT_TRUE(open.CheckMutatingJobCall({}, "SubmitJob").ok());
  EXPECT_TRUE(open.CheckWorker({}, "worker-0001").ok());
  EXPECT_EQ(*open.RegisterAs({}, ""), "");  // the coordinator picks the id
  EXPECT_EQ(*open.RegisterAs({}, "worker-0007"), "worker-0007");
}

TEST(AuthTest, MutatingCallsNeedTheBearerToken) {
  const Auth auth = Auth::Secured(kToken);
  EXPECT_FALSE(auth.open());
  EXPECT_TRUE(auth.CheckMutatingJobCall(Bearer("Bearer " + kToken), "SubmitJob").ok());
  EXPECT_TRUE(auth.CheckMutatingJobCall(Bearer("bearer " + kToken), "SubmitJob").ok());  // the scheme is case-insensitive

  Status missing = auth.CheckMutatingJobCall({}, "SubmitJob");
  EXPECT_EQ(missing.code(), Code::kUnauthenticated);
  EXPECT_EQ(missing.message(), "SubmitJob: a bearer token is required (metadata \"authorization: Bearer TOKEN\": "
                               "pipectl --token or PIPECOORD_TOKEN)");
  Status wrong = auth.CheckMutatingJobCall(Bearer("Bearer " + kToken + "x"), "CancelJob");
  EXPECT_EQ(wrong.code(), Code::kUnauthenticated);
  EXPECT_EQ(wrong.message(), "CancelJob: the bearer token is wrong");
  EXPECT_EQ(auth.CheckMutatingJobCall(Bearer("Bearer " + kToken.substr(1)), "CancelJob").code(), Code::kUnauthenticated);
  EXPECT_EQ(auth.CheckMutatingJobCall(Bearer("Bearer "), "CancelJob").code(), Code::kUnauthenticated);
  EXPECT_EQ(auth.CheckMutatingJobCall(Bearer("Bearer"), "CancelJob").code(), Code::kUnauthenticated);
  Status basic = auth.CheckMutatingJobCall(Bearer("Basic " + kToken), "SubmitJob");
  EXPECT_EQ(basic.code(), Code::kUnauthenticated);
  EXPECT_NE(basic.message().find("must be \"Bearer TOKEN\""), std::string::npos);
  EXPECT_EQ(basic.message().find(kToken), std::string::npos);  // never echoed
  CallCredentials twice = Bearer("Bearer " + kToken);
  twice.authorization.push_back("Bearer " + kToken);
  EXPECT_EQ(auth.CheckMutatingJobCall(twice, "SubmitJob").code(), Code::kUnauthenticated);
  // A worker certificate is no substitute for the token.
  EXPECT_EQ(auth.CheckMutatingJobCall(Certificate({"urn:pipecoord:worker:w1"}), "SubmitJob").code(),
            Code::kUnauthenticated);
}

TEST(AuthTest, WorkerCallsNeedACertificateNamingThatWorker) {
  const Auth auth = Auth::Secured(kToken);
  const CallCredentials w2 = Certificate({"spiffe://example/other", "urn:pipecoord:worker:worker-0002"});
  EXPECT_EQ(*auth.WorkerIdentity(w2), "worker-0002");
  EXPECT_TRUE(auth.CheckWorker(w2, "worker-0002").ok());

  Status other = auth.CheckWorker(w2, "worker-0001");
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
  EXPECT_EQ(other.message(), "worker_id \"worker-0001\": this client certificate is for worker \"worker-0002\"");

  // No certificate: not authenticated at all. A token does not stand in for one.
  Status none = auth.CheckWorker(Bearer("Bearer " + kToken), "worker-0002");
  EXPECT_EQ(none.code(), Code::kUnauthenticated);
  EXPECT_EQ(none.message(), "WorkerService: a client certificate signed by the coordinator's --tls-ca is required "
                            "(worker --tls-cert/--tls-key)");
  // A certificate the CA signed for something else (no worker name), or for two workers.
  Status nameless = auth.CheckWorker(Certificate({"spiffe://example/other"}), "worker-0002");
  EXPECT_EQ(nameless.code(), Code::kPermissionDenied);
  EXPECT_EQ(nameless.message(), "WorkerService: the client certificate names no worker (a URI SAN urn:pipecoord:worker:ID)");
  EXPECT_EQ(auth.WorkerIdentity(Certificate({"urn:pipecoord:worker:"})).status().code(), Code::kPermissionDenied);
  Status two = auth.WorkerIdentity(Certificate({"urn:pipecoord:worker:a", "urn:pipecoord:worker:b"})).status();
  EXPECT_EQ(two.code(), Code::kPermissionDenied);
  EXPECT_NE(two.message().find("names 2 workers"), std::string::npos);
  EXPECT_EQ(*auth.WorkerIdentity(Certificate({"urn:pipecoord:worker:a", "urn:pipecoord:worker:a"})), "a");
  // The prefix must start the URI.
  EXPECT_EQ(auth.WorkerIdentity(Certificate({"x-urn:pipecoord:worker:a"})).status().code(), Code::kPermissionDenied);
}

TEST(AuthTest, RegisterTakesTheCertificatesIdentity) {
  const Auth auth = Auth::Secured(kToken);
  const CallCredentials w2 = Certificate({"urn:pipecoord:worker:worker-0002"});
  EXPECT_EQ(*auth.RegisterAs(w2, ""), "worker-0002");
  EXPECT_EQ(*auth.RegisterAs(w2, "worker-0002"), "worker-0002");  // re-registering after a restart
  EXPECT_EQ(auth.RegisterAs(w2, "worker-0001").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(auth.RegisterAs({}, "").status().code(), Code::kUnauthenticated);
}

}  // namespace
}  // namespace pipecoord::coordinator

# A development PKI made with Debian's openssl at run time (no private key is ever committed):
# the local launcher's throwaway certificates and the TLS tests'. The same commands
# docs/operations.md ("Security") gives for a real deployment. EC P-256 keys (fast to make;
# gRPC accepts them). Sourced, not run:
#   pki_ca DIR                      DIR/ca.crt, DIR/ca.key
#   pki_server DIR NAME SAN         DIR/NAME.crt, DIR/NAME.key; SAN e.g. DNS:localhost,IP:127.0.0.1
#   pki_worker DIR WORKER_ID [CA]   DIR/WORKER_ID.crt, .key: a client certificate whose URI SAN
#                                   urn:pipecoord:worker:WORKER_ID names the worker (CA: DIR/ca by
#                                   default; another prefix signs with another CA)
#   pki_token FILE                  a random bearer token (64 hex digits), readable by its owner only

pki_ca() {
  local dir=$1
  mkdir -p "$dir"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc -days 30 \
    -subj "/CN=pipecoord test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
}

# _pki_sign DIR NAME CA_PREFIX EXTENSIONS...: a key, a request, a certificate signed by the CA.
_pki_sign() {
  local dir=$1 name=$2 ca=$3
  shift 3
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  printf '%s\n' "$@" > "$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 30 \
    -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

pki_server() {
  _pki_sign "$1" "$2" "$1/ca" "subjectAltName=$3" "extendedKeyUsage=serverAuth" \
    "keyUsage=critical,digitalSignature"
}

pki_worker() {
  _pki_sign "$1" "$2" "${3:-$1/ca}" "subjectAltName=URI:urn:pipecoord:worker:$2" "extendedKeyUsage=clientAuth" \
    "keyUsage=critical,digitalSignature"
}

pki_token() {
  (umask 077 && openssl rand -hex 32 > "$1")
}

#!/bin/bash
# Host side of prov-eap: the certificates an enterprise network and a vendor would have,
# made with the host's openssl at scenario time (new keys every run; the guest's own openssl
# would cost TCG minutes): the lab CA, the RADIUS server's certificate (radius.lab.example),
# a client certificate for EAP-TLS, an expired one (valid 2020-2021, signed by the same CA),
# and a rogue CA with a server certificate of the same name (an access point posing as the
# network). Into $LAB_SHARE/eap/. No host service.
set -euo pipefail
out="$LAB_SHARE/eap"
mkdir -p "$out"
cd "$out"
ossl() { openssl "$@" 2> /dev/null; }
key() { ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1"; }
ca() { # ca NAME CN
    key "$1.key"
    ossl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 30 -out "$1.pem" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() { # leaf NAME CA CN EXT
    key "$1.key"
    ossl req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr"
    printf '%s\n' "$4" > "$1.ext"
    ossl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 30 \
        -extfile "$1.ext" -out "$1.pem"
}
ca ca "svc lab enterprise CA"
ca rogue-ca "svc lab enterprise CA"
leaf server ca radius.lab.example \
    $'subjectAltName=DNS:radius.lab.example\nextendedKeyUsage=serverAuth'
leaf rogue-server rogue-ca radius.lab.example \
    $'subjectAltName=DNS:radius.lab.example\nextendedKeyUsage=serverAuth'
leaf client ca machine.lab.example 'extendedKeyUsage=clientAuth'
# Expired: `openssl ca` is the one 3.0 command that takes explicit dates.
key expired.key
ossl req -new -key expired.key -subj "/CN=machine.lab.example" -out expired.csr
mkdir -p ca-db && : > ca-db/index.txt && echo 1000 > ca-db/serial
cat > ca-db/ca.cnf <<CNF
[ca]
default_ca = lab
[lab]
database = $out/ca-db/index.txt
serial = $out/ca-db/serial
new_certs_dir = $out/ca-db
default_md = sha256
policy = any
extensions = client
[any]
commonName = supplied
[client]
extendedKeyUsage = clientAuth
CNF
ossl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
    -startdate 20200101000000Z -enddate 20210101000000Z -out expired.pem
rm -rf ca-db ./*.csr ./*.ext ./*.srl ca.key rogue-ca.key
for f in ca rogue-ca server rogue-server client expired; do
    [ -s "$f.pem" ] || { echo "prov-eap: $f.pem not made" >&2; exit 1; }
done
openssl x509 -in expired.pem -noout -checkend 0 > /dev/null && { echo "prov-eap: expired.pem is not expired" >&2; exit 1; }
chmod 0644 ./*

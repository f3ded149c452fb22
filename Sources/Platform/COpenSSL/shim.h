// The raw SHA-256 block interface (SHA256_Init and friends) carries OpenSSL 3's deprecation mark, but
// it is what lets HMAC reuse precomputed pad states by copying a plain struct, which the EVP interface
// cannot do cheaply. Asking for the 1.1.1 API level keeps those declarations unmarked.
#define OPENSSL_API_COMPAT 10101

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/kdf.h>
#include <openssl/rsa.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <openssl/decoder.h>
#include <openssl/encoder.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>

// libcrypto, loaded when KeychainCrypto is first used rather than linked: the `security` command
// starts for every call, and a lookup through the daemon uses no cryptography of its own; linked,
// libcrypto would be loaded and its 4,200 symbol relocations bound at every start all the same (Debian
// builds it to bind them at load). Programs and tests that call OpenSSL directly link it themselves.
#include <dlfcn.h>
#include <stddef.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
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

#define KEYCHAIN_CRYPTO_FUNCTIONS(X) \
    X(ASN1_INTEGER_to_BN) \
    X(ASN1_STRING_get0_data) \
    X(ASN1_STRING_length) \
    X(ASN1_STRING_to_UTF8) \
    X(BN_bin2bn) \
    X(BN_bn2bin) \
    X(BN_bn2binpad) \
    X(BN_clear_free) \
    X(BN_cmp) \
    X(BN_free) \
    X(BN_is_odd) \
    X(BN_num_bits) \
    X(BN_secure_new) \
    X(CRYPTO_clear_free) \
    X(CRYPTO_free) \
    X(ECDSA_SIG_free) \
    X(ECDSA_SIG_get0) \
    X(ECDSA_SIG_new) \
    X(ECDSA_SIG_set0) \
    X(ERR_clear_error) \
    X(EVP_CIPHER_CTX_ctrl) \
    X(EVP_CIPHER_CTX_free) \
    X(EVP_CIPHER_CTX_new) \
    X(EVP_CIPHER_CTX_set_padding) \
    X(EVP_CIPHER_fetch) \
    X(EVP_CIPHER_get_iv_length) \
    X(EVP_CIPHER_get_key_length) \
    X(EVP_CipherFinal_ex) \
    X(EVP_CipherInit_ex2) \
    X(EVP_CipherUpdate) \
    X(EVP_Digest) \
    X(EVP_DigestFinal_ex) \
    X(EVP_DigestInit_ex2) \
    X(EVP_DigestSign) \
    X(EVP_DigestSignInit_ex) \
    X(EVP_DigestUpdate) \
    X(EVP_DigestVerify) \
    X(EVP_DigestVerifyInit_ex) \
    X(EVP_KDF_CTX_free) \
    X(EVP_KDF_CTX_new) \
    X(EVP_KDF_derive) \
    X(EVP_KDF_fetch) \
    X(EVP_KDF_free) \
    X(EVP_MAC_CTX_dup) \
    X(EVP_MAC_CTX_free) \
    X(EVP_MAC_CTX_new) \
    X(EVP_MAC_fetch) \
    X(EVP_MAC_final) \
    X(EVP_MAC_init) \
    X(EVP_MAC_update) \
    X(EVP_MD_CTX_free) \
    X(EVP_MD_CTX_new) \
    X(EVP_MD_fetch) \
    X(EVP_MD_free) \
    X(EVP_PKEY_CTX_free) \
    X(EVP_PKEY_CTX_new_from_name) \
    X(EVP_PKEY_CTX_new_from_pkey) \
    X(EVP_PKEY_CTX_set_dh_pad) \
    X(EVP_PKEY_CTX_set_group_name) \
    X(EVP_PKEY_CTX_set_rsa_keygen_bits) \
    X(EVP_PKEY_CTX_set_rsa_mgf1_md_name) \
    X(EVP_PKEY_CTX_set_rsa_oaep_md_name) \
    X(EVP_PKEY_CTX_set_rsa_padding) \
    X(EVP_PKEY_CTX_set_rsa_pss_saltlen) \
    X(EVP_PKEY_CTX_set_signature_md) \
    X(EVP_PKEY_decrypt) \
    X(EVP_PKEY_decrypt_init) \
    X(EVP_PKEY_derive) \
    X(EVP_PKEY_derive_init) \
    X(EVP_PKEY_derive_set_peer) \
    X(EVP_PKEY_encrypt) \
    X(EVP_PKEY_encrypt_init) \
    X(EVP_PKEY_free) \
    X(EVP_PKEY_fromdata) \
    X(EVP_PKEY_fromdata_init) \
    X(EVP_PKEY_generate) \
    X(EVP_PKEY_get_base_id) \
    X(EVP_PKEY_get_bits) \
    X(EVP_PKEY_get_bn_param) \
    X(EVP_PKEY_get_octet_string_param) \
    X(EVP_PKEY_get_utf8_string_param) \
    X(EVP_PKEY_keygen_init) \
    X(EVP_PKEY_pairwise_check) \
    X(EVP_PKEY_public_check) \
    X(EVP_PKEY_sign) \
    X(EVP_PKEY_sign_init) \
    X(EVP_PKEY_up_ref) \
    X(EVP_PKEY_verify) \
    X(EVP_PKEY_verify_init) \
    X(EVP_sha256) \
    X(GENERAL_NAMES_free) \
    X(OPENSSL_cleanse) \
    X(OPENSSL_init_crypto) \
    X(OPENSSL_sk_num) \
    X(OPENSSL_sk_pop_free) \
    X(OPENSSL_sk_value) \
    X(OSSL_DECODER_CTX_free) \
    X(OSSL_DECODER_CTX_new_for_pkey) \
    X(OSSL_DECODER_from_data) \
    X(OSSL_ENCODER_CTX_free) \
    X(OSSL_ENCODER_CTX_new_for_pkey) \
    X(OSSL_ENCODER_to_data) \
    X(OSSL_PARAM_BLD_free) \
    X(OSSL_PARAM_BLD_new) \
    X(OSSL_PARAM_BLD_push_BN) \
    X(OSSL_PARAM_BLD_push_octet_string) \
    X(OSSL_PARAM_BLD_push_utf8_string) \
    X(OSSL_PARAM_BLD_to_param) \
    X(OSSL_PARAM_construct_end) \
    X(OSSL_PARAM_construct_octet_string) \
    X(OSSL_PARAM_construct_uint32) \
    X(OSSL_PARAM_construct_uint64) \
    X(OSSL_PARAM_construct_utf8_string) \
    X(OSSL_PARAM_free) \
    X(PKCS12_free) \
    X(PKCS12_mac_present) \
    X(PKCS12_parse) \
    X(PKCS12_verify_mac) \
    X(PKCS5_PBKDF2_HMAC) \
    X(RAND_bytes) \
    X(X509_NAME_ENTRY_get_data) \
    X(X509_NAME_get_entry) \
    X(X509_NAME_get_index_by_NID) \
    X(X509_alias_get0) \
    X(X509_free) \
    X(X509_get0_pubkey) \
    X(X509_get0_serialNumber) \
    X(X509_get0_subject_key_id) \
    X(X509_get_ext_d2i) \
    X(X509_get_issuer_name) \
    X(X509_get_subject_name) \
    X(X509_get_version) \
    X(d2i_ECDSA_SIG) \
    X(d2i_PKCS12) \
    X(d2i_X509) \
    X(i2d_ECDSA_SIG) \
    X(i2d_PUBKEY) \
    X(i2d_PrivateKey) \
    X(i2d_PublicKey) \
    X(i2d_X509) \
    X(i2d_X509_NAME)

#define KEYCHAIN_CRYPTO_FIELD(name) __typeof__(&name) _Nonnull name;
/// The libcrypto functions KeychainCrypto uses, each found in the library by its name.
struct keychain_crypto {
    KEYCHAIN_CRYPTO_FUNCTIONS(KEYCHAIN_CRYPTO_FIELD)
};
#undef KEYCHAIN_CRYPTO_FIELD

/// Loads libcrypto and finds its functions, once per caller: the functions, else NULL with the
/// loader's reason in `problem` (the library is missing, or too old to have one of them). Not thread
/// safe: the caller loads once (Swift's lazy global does).
static inline const struct keychain_crypto *_Nullable keychain_crypto_load(const char *_Nullable *_Nonnull problem) {
    static struct keychain_crypto functions;
    void *library = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        *problem = dlerror();
        return NULL;
    }
#define KEYCHAIN_CRYPTO_LOOKUP(name) \
    functions.name = (__typeof__(&name))dlsym(library, #name); \
    if (functions.name == NULL) { \
        *problem = "a function is missing: " #name; \
        return NULL; \
    }
    KEYCHAIN_CRYPTO_FUNCTIONS(KEYCHAIN_CRYPTO_LOOKUP)
#undef KEYCHAIN_CRYPTO_LOOKUP
    return &functions;
}

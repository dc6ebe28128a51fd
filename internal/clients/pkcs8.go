package clients

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 keys (RFC 5958, "ENCRYPTED PRIVATE KEY" in PEM), which
// Kafka decrypts with ssl.key.password. Only PBES2 (RFC 8018) with PBKDF2
// is supported: it is what openssl and Java write by default.

var (
	oidPBES2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}

	prfs = map[string]func() hash.Hash{
		"1.2.840.113549.2.7":  sha1.New,
		"1.2.840.113549.2.8":  sha256.New224,
		"1.2.840.113549.2.9":  sha256.New,
		"1.2.840.113549.2.10": sha512.New384,
		"1.2.840.113549.2.11": sha512.New,
	}
	// ciphers maps an encryption scheme to its key length and block cipher.
	ciphers = map[string]struct {
		keyLen int
		block  func([]byte) (cipher.Block, error)
	}{
		"2.16.840.1.101.3.4.1.2":  {16, aes.NewCipher},
		"2.16.840.1.101.3.4.1.22": {24, aes.NewCipher},
		"2.16.840.1.101.3.4.1.42": {32, aes.NewCipher},
		"1.2.840.113549.3.7":      {24, des.NewTripleDESCipher},
	}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Scheme pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

var errKeyPassword = errors.New("cannot decrypt the private key: wrong ssl.key.password or damaged key")

// decryptPKCS8 returns the DER PKCS#8 key inside an EncryptedPrivateKeyInfo.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, errors.New("malformed encrypted private key")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: algorithm %s is not supported (want PBES2, e.g. openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algo.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("malformed PBES2 parameters: %w", err)
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %s is not supported (want PBKDF2)", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("malformed PBKDF2 parameters: %w", err)
	}
	prf := sha1.New // the default PRF
	if len(kdf.PRF.Algorithm) > 0 {
		var ok bool
		if prf, ok = prfs[kdf.PRF.Algorithm.String()]; !ok {
			return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %s is not supported", kdf.PRF.Algorithm)
		}
	}
	c, ok := ciphers[params.Scheme.Algorithm.String()]
	if !ok {
		return nil, fmt.Errorf("encrypted private key: cipher %s is not supported (want AES-CBC or DES-EDE3-CBC)", params.Scheme.Algorithm)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Scheme.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("malformed cipher parameters: %w", err)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, c.keyLen)
	if err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	block, err := c.block(key)
	if err != nil {
		return nil, err
	}
	if len(iv) != block.BlockSize() || len(info.Data) == 0 || len(info.Data)%block.BlockSize() != 0 {
		return nil, errors.New("malformed encrypted private key: bad IV or data length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// Strip the PKCS#7 padding; a wrong password almost always breaks it.
	pad := int(out[len(out)-1])
	if pad == 0 || pad > block.BlockSize() {
		return nil, errKeyPassword
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errKeyPassword
		}
	}
	return out[:len(out)-pad], nil
}

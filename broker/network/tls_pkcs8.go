package network

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// decryptPKCS8 decrypts an ENCRYPTED PRIVATE KEY (PKCS#8
// EncryptedPrivateKeyInfo) made with PBES2: PBKDF2 with HMAC-SHA1,
// -SHA256 or -SHA512, and AES-CBC (what `openssl pkcs8 -topk8 -v2 aes256`
// and Kafka's PEM keystores use). It returns the PKCS#8 DER of the key.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	if password == "" {
		return nil, errors.New("the private key is encrypted; set ssl.key.password")
	}
	var info struct {
		Algo struct {
			OID    asn1.ObjectIdentifier
			Params struct {
				KDF struct {
					OID    asn1.ObjectIdentifier
					Params struct {
						Salt       []byte
						Iterations int
						KeyLen     int `asn1:"optional"`
						PRF        struct {
							OID    asn1.ObjectIdentifier
							Params asn1.RawValue `asn1:"optional"`
						} `asn1:"optional"`
					}
				}
				Cipher struct {
					OID asn1.ObjectIdentifier
					IV  []byte
				}
			}
		}
		Data []byte
	}
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	p := info.Algo.Params
	if !info.Algo.OID.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}) ||
		!p.KDF.OID.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}) {
		return nil, errors.New("encrypted private key: only PBES2 with PBKDF2 is supported")
	}
	var h func() hash.Hash
	switch prf := p.KDF.Params.PRF.OID; {
	case len(prf) == 0 || prf.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}):
		h = sha1.New
	case prf.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}):
		h = sha256.New
	case prf.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}):
		h = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: unsupported PRF %v", prf)
	}
	aesOID := asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1}
	c := p.Cipher.OID
	if len(c) != len(aesOID)+1 || !c[:len(aesOID)].Equal(aesOID) {
		return nil, fmt.Errorf("encrypted private key: unsupported cipher %v (AES-CBC is)", c)
	}
	var keyLen int
	switch c[len(c)-1] {
	case 2:
		keyLen = 16
	case 22:
		keyLen = 24
	case 42:
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted private key: unsupported cipher %v (AES-CBC is)", c)
	}
	if p.KDF.Params.Iterations <= 0 || p.KDF.Params.Iterations > 10_000_000 {
		return nil, errors.New("encrypted private key: bad PBKDF2 iteration count")
	}
	key, err := pbkdf2.Key(h, password, p.KDF.Params.Salt, p.KDF.Params.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(key)
	if len(p.Cipher.IV) != aes.BlockSize || len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key: bad IV or data length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, p.Cipher.IV).CryptBlocks(out, info.Data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || pad > len(out) {
		return nil, errors.New("encrypted private key: wrong ssl.key.password")
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errors.New("encrypted private key: wrong ssl.key.password")
		}
	}
	return out[:len(out)-pad], nil
}

package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteArchive writes img, tagged tag (e.g. strata:latest), to w as one
// tar that is an OCI image layout and a docker-archive at once:
//
//	oci-layout                  {"imageLayoutVersion":"1.0.0"}
//	index.json                  the manifest's descriptor, with the tag in
//	                            org.opencontainers.image.ref.name and
//	                            io.containerd.image.name
//	blobs/sha256/<hex>          the manifest, the config and each layer (gzip)
//	manifest.json               docker-archive: config, layers and RepoTags,
//	                            naming the same blobs
func WriteArchive(w io.Writer, img v1.Image, tag string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", tag, err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	mdigest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	cdigest, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}

	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	put := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: mtime, Typeflag: tar.TypeDir, Format: tar.FormatUSTAR}); err != nil {
			return fmt.Errorf("image: write: %w", err)
		}
	}
	if err := put(blobPath(mdigest), manifest); err != nil {
		return fmt.Errorf("image: write: %w", err)
	}
	if err := put(blobPath(cdigest), config); err != nil {
		return fmt.Errorf("image: write: %w", err)
	}
	var layerPaths []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		h := &tar.Header{Name: blobPath(d), Mode: 0o644, Size: size, ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			rc.Close()
			return fmt.Errorf("image: write: %w", err)
		}
		_, err = io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("image: write: %w", err)
		}
		layerPaths = append(layerPaths, blobPath(d))
	}

	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Digest:    mdigest,
			Size:      int64(len(manifest)),
			Annotations: map[string]string{
				"io.containerd.image.name":          ref.Name(),
				"org.opencontainers.image.ref.name": ref.TagStr(),
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	repoTag := ref.Context().RepositoryStr() + ":" + ref.TagStr()
	if reg := ref.Context().RegistryStr(); reg != name.DefaultRegistry {
		repoTag = reg + "/" + repoTag
	}
	repoTag = strings.TrimPrefix(repoTag, "library/")
	dockerManifest, err := json.Marshal([]map[string]any{{
		"Config":   blobPath(cdigest),
		"RepoTags": []string{repoTag},
		"Layers":   layerPaths,
	}})
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"index.json", indexJSON},
		{"manifest.json", dockerManifest},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	} {
		if err := put(f.name, f.data); err != nil {
			return fmt.Errorf("image: write: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image: write: %w", err)
	}
	return nil
}

// WriteArchiveFile writes the archive to path (through a temporary file
// renamed into place, so a failed build leaves no half archive).
func WriteArchiveFile(path string, img v1.Image, tag string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := WriteArchive(f, img, tag); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

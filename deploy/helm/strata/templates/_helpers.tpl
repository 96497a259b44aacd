{{/* The chart's name. */}}
{{- define "strata.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, the prefix of every object. */}}
{{- define "strata.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "strata.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: strata
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- end -}}

{{/* Selector labels of the brokers. */}}
{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: broker
{{- end -}}

{{/* Selector labels of the chart's ZooKeeper ensemble. */}}
{{- define "strata.zookeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: zookeeper
{{- end -}}

{{- define "strata.headless" -}}
{{- printf "%s-headless" (include "strata.fullname" .) -}}
{{- end -}}

{{- define "strata.zookeeper.fullname" -}}
{{- printf "%s-zookeeper" (include "strata.fullname" .) -}}
{{- end -}}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "strata.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{- define "strata.rackImage" -}}
{{- printf "%s:%s" .Values.rack.image.repository (toString .Values.rack.image.tag) -}}
{{- end -}}

{{/* The client bootstrap address, HOST:PORT of the client Service. */}}
{{- define "strata.bootstrap" -}}
{{- printf "%s.%s.svc.%s:%d" (include "strata.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.listener.port) -}}
{{- end -}}

{{/* zookeeper.connect: the given address, or the chart's ensemble's. */}}
{{- define "strata.zookeeperConnect" -}}
{{- if .Values.zookeeper.connect -}}
{{- .Values.zookeeper.connect -}}
{{- else if .Values.zookeeper.ensemble.enabled -}}
{{- $zk := include "strata.zookeeper.fullname" . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.zookeeper.ensemble.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s-headless.%s.svc.%s:2181" $zk $i $zk $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- printf "%s%s" (join "," $hosts) .Values.zookeeper.ensemble.chroot -}}
{{- else -}}
{{- fail "zookeeper: set zookeeper.connect to your ensemble's HOST:PORT[,...][/chroot], or zookeeper.ensemble.enabled=true" -}}
{{- end -}}
{{- end -}}

{{/* Values checks: each failure is one line naming the value. */}}
{{- define "strata.validate" -}}
{{- if not .Values.tier.url -}}
{{- fail "tier.url: set the bucket, s3://BUCKET/PREFIX (the brokers' volumes hold only the local tail)" -}}
{{- end -}}
{{- if not (hasPrefix "s3://" .Values.tier.url) -}}
{{- fail (printf "tier.url %q: want s3://BUCKET/PREFIX (a file:// tier is not shared between pods)" .Values.tier.url) -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail (printf "replicas %v: want at least 1 (to stop every broker, see strata admin cluster drain)" .Values.replicas) -}}
{{- end -}}
{{- if not (has .Values.rack.source (list "node" "podLabel" "none")) -}}
{{- fail (printf "rack.source %q: want node, podLabel or none" .Values.rack.source) -}}
{{- end -}}
{{- if and (eq .Values.rack.source "podLabel") (not (has .Values.rack.nodeLabel (list "topology.kubernetes.io/zone" "topology.kubernetes.io/region"))) -}}
{{- fail (printf "rack.nodeLabel %q: with rack.source=podLabel Kubernetes copies only topology.kubernetes.io/zone and topology.kubernetes.io/region to pods" .Values.rack.nodeLabel) -}}
{{- end -}}
{{- if and (eq .Values.rack.source "node") (not .Values.serviceAccount.create) (eq (include "strata.serviceAccountName" .) "default") -}}
{{- fail "rack.source=node needs a service account of the chart's own: set serviceAccount.create=true or serviceAccount.name" -}}
{{- end -}}
{{- $job := toString .Values.scaling.job -}}
{{- if not (has $job (list "" "rebalance" "decommission")) -}}
{{- fail (printf "scaling.job %q: want rebalance, decommission or empty" $job) -}}
{{- end -}}
{{- if eq $job "decommission" -}}
{{- if eq (toString .Values.scaling.brokerId) "" -}}
{{- fail "scaling.brokerId: scaling.job=decommission needs the id of the broker to empty" -}}
{{- end -}}
{{- if lt (int .Values.scaling.brokerId) 0 -}}
{{- fail (printf "scaling.brokerId %v: want a broker id, 0 or more" .Values.scaling.brokerId) -}}
{{- end -}}
{{- if and .Values.scaling.hook (ne (int .Values.scaling.brokerId) (int .Values.replicas)) -}}
{{- fail (printf "scaling.brokerId %v: shrinking to replicas=%v removes broker %v, and the decommission hook must empty that one (shrink by one broker per upgrade)" .Values.scaling.brokerId .Values.replicas .Values.replicas) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A property value: YAML numbers arrive as float64, printed whole. */}}
{{- define "strata.propValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

//! The catalogue of source types (GET /sources, GET /_connector/connectors): every type a
//! connection can be made to, each served by the driver of its protocol family. A type is
//! listed only when a family here speaks its protocol; docs/connectors.md says which types were
//! tested against a real server and which only share a tested family's driver.

use serde::Serialize;

/// A protocol family: one driver serves every type of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// The PostgreSQL wire protocol (datafusion-table-providers' postgres provider).
    Postgres,
    /// The MySQL wire protocol (datafusion-table-providers' mysql provider).
    Mysql,
    /// A SQLite database file (datafusion-table-providers' sqlite provider).
    Sqlite,
    /// Parquet, CSV, JSON and NDJSON files in an object store (DataFusion listing tables).
    ObjectStore,
    /// The Elasticsearch API (searches forwarded as they are).
    SearchEngine,
    /// An HTTP API answering JSON records.
    HttpJson,
    /// The Kafka protocol (rdkafka): topics read in place.
    Kafka,
    /// The Prometheus query API: metrics read in place.
    Prometheus,
    /// NATS JetStream (async-nats): streams read by sequence.
    Nats,
    /// The Redis protocol (RESP, the redis crate): keys matching a pattern.
    Redis,
    /// AMQP 0-9-1 (lapin): queues, consumed and acknowledged.
    Amqp,
    /// MQTT 3.1.1 (rumqttc): topic filters, subscribed in a persistent session.
    Mqtt,
}

/// What a connection of a family can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// SQL in place (POST /sql with a connection).
    Sql,
    /// Query DSL in place (POST /source/{id}/{dataset}/dsl).
    Dsl,
    /// Import jobs copy its datasets (PUT /import/{source_type}).
    Import,
    /// Import jobs follow its streams until cancelled (`follow`).
    Stream,
}

impl Family {
    /// The protocol's name, as the catalogue shows it.
    pub fn protocol(self) -> &'static str {
        match self {
            Family::Postgres => "postgresql-wire",
            Family::Mysql => "mysql-wire",
            Family::Sqlite => "sqlite-file",
            Family::ObjectStore => "object-store-files",
            Family::SearchEngine => "elasticsearch-api",
            Family::HttpJson => "http-json",
            Family::Kafka => "kafka-protocol",
            Family::Prometheus => "prometheus-api",
            Family::Nats => "nats-jetstream",
            Family::Redis => "redis-protocol",
            Family::Amqp => "amqp-0-9-1",
            Family::Mqtt => "mqtt-3.1.1",
        }
    }

    /// The key of an import's `source` that names a dataset of a source read as messages by a
    /// cursor (a table of such a source is read that way too); `None` for the others.
    pub fn message_noun(self) -> Option<&'static str> {
        match self {
            Family::Kafka | Family::Mqtt => Some("topic"),
            Family::Nats => Some("stream"),
            Family::Amqp => Some("queue"),
            Family::Redis => Some("key_pattern"),
            Family::Postgres
            | Family::Mysql
            | Family::Sqlite
            | Family::ObjectStore
            | Family::SearchEngine
            | Family::HttpJson
            | Family::Prometheus => None,
        }
    }

    pub fn capabilities(self) -> &'static [Capability] {
        match self {
            Family::Postgres
            | Family::Mysql
            | Family::Sqlite
            | Family::ObjectStore
            | Family::HttpJson
            | Family::Prometheus => &[Capability::Sql, Capability::Dsl, Capability::Import],
            Family::SearchEngine => &[Capability::Dsl, Capability::Import],
            Family::Kafka | Family::Nats => &[
                Capability::Sql,
                Capability::Dsl,
                Capability::Import,
                Capability::Stream,
            ],
            // A snapshot of the keys: SQL and imports, nothing to follow.
            Family::Redis => &[Capability::Sql, Capability::Dsl, Capability::Import],
            // Reading a queue consumes it, and a topic filter keeps no history (only retained
            // messages): both are imported and followed, never queried in place.
            Family::Amqp | Family::Mqtt => &[Capability::Import, Capability::Stream],
        }
    }
}

/// One source type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connector {
    pub id: &'static str,
    pub name: &'static str,
    pub category: &'static str,
    pub description: &'static str,
    pub family: Family,
    /// The port a connection uses when its config gives none (wire protocols).
    pub default_port: u16,
    /// The URL schemes its `url` may have (object stores).
    pub schemes: &'static [&'static str],
    /// Whether its config must give `endpoint` (S3-compatible services other than AWS).
    pub needs_endpoint: bool,
    /// The service name its SigV4-signed requests use by default (search engines).
    pub service: &'static str,
}

const fn wire(
    id: &'static str,
    name: &'static str,
    category: &'static str,
    description: &'static str,
    family: Family,
    default_port: u16,
) -> Connector {
    Connector {
        id,
        name,
        category,
        description,
        family,
        default_port,
        schemes: &[],
        needs_endpoint: false,
        service: "",
    }
}

const fn files(
    id: &'static str,
    name: &'static str,
    description: &'static str,
    schemes: &'static [&'static str],
    needs_endpoint: bool,
) -> Connector {
    Connector {
        id,
        name,
        category: "object storage",
        description,
        family: Family::ObjectStore,
        default_port: 0,
        schemes,
        needs_endpoint,
        service: "",
    }
}

const fn search(
    id: &'static str,
    name: &'static str,
    description: &'static str,
    service: &'static str,
) -> Connector {
    Connector {
        id,
        name,
        category: "search",
        description,
        family: Family::SearchEngine,
        default_port: 0,
        schemes: &["http", "https"],
        needs_endpoint: false,
        service,
    }
}

use Family::{Mysql, Postgres};

const DB: &str = "database";
const WAREHOUSE: &str = "data warehouse";
const TIME_SERIES: &str = "time series";
const STREAMING: &str = "streaming database";
const STREAMING_PLATFORM: &str = "streaming";
const CACHE: &str = "key-value store";
const QUEUE: &str = "message queue";
const IOT: &str = "iot messaging";

const fn metrics(id: &'static str, name: &'static str, description: &'static str) -> Connector {
    Connector {
        id,
        name,
        category: "metrics",
        description,
        family: Family::Prometheus,
        default_port: 0,
        schemes: &["http", "https"],
        needs_endpoint: false,
        service: "",
    }
}

/// Every source type, in the order the catalogue lists them.
#[rustfmt::skip]
pub const CONNECTORS: &[Connector] = &[
    // The PostgreSQL wire.
    wire("postgresql", "PostgreSQL", DB, "PostgreSQL, the open-source relational database", Postgres, 5432),
    wire("timescaledb", "TimescaleDB", TIME_SERIES, "Time-series tables (hypertables) on PostgreSQL", Postgres, 5432),
    wire("cockroachdb", "CockroachDB", DB, "Distributed SQL database speaking the PostgreSQL wire protocol", Postgres, 26257),
    wire("yugabytedb", "YugabyteDB", DB, "Distributed SQL database with a PostgreSQL-compatible API (YSQL)", Postgres, 5433),
    wire("neon", "Neon", DB, "Serverless PostgreSQL", Postgres, 5432),
    wire("supabase", "Supabase", DB, "The PostgreSQL database of a Supabase project", Postgres, 5432),
    wire("redshift", "Amazon Redshift", WAREHOUSE, "Amazon's data warehouse, reached over its PostgreSQL-compatible protocol", Postgres, 5439),
    wire("alloydb", "AlloyDB for PostgreSQL", DB, "Google Cloud's PostgreSQL-compatible database", Postgres, 5432),
    wire("citus", "Citus", DB, "Distributed PostgreSQL (the Citus extension)", Postgres, 5432),
    wire("materialize", "Materialize", STREAMING, "Incrementally maintained views over the PostgreSQL wire protocol", Postgres, 6875),
    wire("risingwave", "RisingWave", STREAMING, "Streaming database speaking the PostgreSQL wire protocol", Postgres, 4566),
    wire("cratedb", "CrateDB", DB, "Distributed SQL database with a PostgreSQL wire endpoint", Postgres, 5432),
    wire("questdb", "QuestDB", TIME_SERIES, "Time-series database with a PostgreSQL wire endpoint", Postgres, 8812),
    wire("greenplum", "Greenplum", WAREHOUSE, "Massively parallel data warehouse based on PostgreSQL", Postgres, 5432),
    wire("aurora_postgresql", "Amazon Aurora PostgreSQL", DB, "Amazon Aurora, PostgreSQL-compatible edition", Postgres, 5432),
    wire("rds_postgresql", "Amazon RDS for PostgreSQL", DB, "PostgreSQL managed by Amazon RDS", Postgres, 5432),
    wire("azure_postgresql", "Azure Database for PostgreSQL", DB, "PostgreSQL managed by Microsoft Azure", Postgres, 5432),
    wire("cloudsql_postgresql", "Cloud SQL for PostgreSQL", DB, "PostgreSQL managed by Google Cloud SQL", Postgres, 5432),
    wire("paradedb", "ParadeDB", DB, "PostgreSQL with search and analytics extensions", Postgres, 5432),
    // The MySQL wire.
    wire("mysql", "MySQL", DB, "MySQL, the open-source relational database", Mysql, 3306),
    wire("mariadb", "MariaDB", DB, "MariaDB Server, the community fork of MySQL", Mysql, 3306),
    wire("tidb", "TiDB", DB, "Distributed SQL database compatible with the MySQL protocol", Mysql, 4000),
    wire("singlestore", "SingleStore", DB, "Distributed SQL database speaking the MySQL wire protocol", Mysql, 3306),
    wire("planetscale", "PlanetScale", DB, "Serverless MySQL built on Vitess", Mysql, 3306),
    wire("vitess", "Vitess", DB, "Sharded MySQL through vtgate", Mysql, 15306),
    wire("starrocks", "StarRocks", WAREHOUSE, "MPP analytical database with a MySQL-compatible front end", Mysql, 9030),
    wire("doris", "Apache Doris", WAREHOUSE, "MPP analytical database with a MySQL-compatible front end", Mysql, 9030),
    wire("aurora_mysql", "Amazon Aurora MySQL", DB, "Amazon Aurora, MySQL-compatible edition", Mysql, 3306),
    wire("rds_mysql", "Amazon RDS for MySQL", DB, "MySQL managed by Amazon RDS", Mysql, 3306),
    wire("azure_mysql", "Azure Database for MySQL", DB, "MySQL managed by Microsoft Azure", Mysql, 3306),
    wire("cloudsql_mysql", "Cloud SQL for MySQL", DB, "MySQL managed by Google Cloud SQL", Mysql, 3306),
    wire("percona_server", "Percona Server for MySQL", DB, "Percona's drop-in MySQL server", Mysql, 3306),
    wire("oceanbase", "OceanBase", DB, "Distributed database, MySQL mode", Mysql, 2881),
    // SQLite files.
    wire("sqlite", "SQLite", DB, "A SQLite database file on this node", Family::Sqlite, 0),
    // Files in object stores.
    files("s3", "Amazon S3", "Parquet, CSV, JSON and NDJSON files in an Amazon S3 bucket", &["s3"], false),
    files("gcs", "Google Cloud Storage", "Parquet, CSV, JSON and NDJSON files in a Google Cloud Storage bucket", &["gs"], false),
    files("azure_blob", "Azure Blob Storage", "Parquet, CSV, JSON and NDJSON files in an Azure Blob Storage container", &["az"], false),
    files("minio", "MinIO", "Files in a MinIO bucket (S3 API)", &["s3"], true),
    files("cloudflare_r2", "Cloudflare R2", "Files in an R2 bucket (S3 API)", &["s3"], true),
    files("backblaze_b2", "Backblaze B2", "Files in a B2 bucket (S3-compatible API)", &["s3"], true),
    files("wasabi", "Wasabi", "Files in a Wasabi bucket (S3 API)", &["s3"], true),
    files("ceph", "Ceph Object Gateway", "Files in a Ceph RGW bucket (S3 API)", &["s3"], true),
    files("digitalocean_spaces", "DigitalOcean Spaces", "Files in a Spaces bucket (S3 API)", &["s3"], true),
    files("oci_object_storage", "Oracle Cloud Object Storage", "Files in an OCI bucket (S3 compatibility API)", &["s3"], true),
    files("ibm_cos", "IBM Cloud Object Storage", "Files in an IBM COS bucket (S3 API)", &["s3"], true),
    files("linode_object_storage", "Akamai (Linode) Object Storage", "Files in a Linode bucket (S3 API)", &["s3"], true),
    files("scaleway_object_storage", "Scaleway Object Storage", "Files in a Scaleway bucket (S3 API)", &["s3"], true),
    files("local_files", "Local files", "Parquet, CSV, JSON and NDJSON files in a directory of this node", &["file"], false),
    // The Elasticsearch API.
    search("elasticsearch", "Elasticsearch", "Indices of an Elasticsearch cluster", "es"),
    search("opensearch", "OpenSearch", "Indices of an OpenSearch cluster", "es"),
    search("amazon_opensearch", "Amazon OpenSearch Service", "Indices of an Amazon OpenSearch Service domain (SigV4-signed requests)", "es"),
    search("elastic_cloud", "Elastic Cloud", "Indices of an Elasticsearch deployment on Elastic Cloud", "es"),
    search("strata", "strata", "Datasets of another strata, through its Elasticsearch-compatible API (SigV4-signed requests)", "strata"),
    // The Kafka protocol.
    wire("kafka", "Apache Kafka", STREAMING_PLATFORM, "Topics of a Kafka cluster", Family::Kafka, 9092),
    wire("redpanda", "Redpanda", STREAMING_PLATFORM, "Topics of a Redpanda cluster (Kafka API)", Family::Kafka, 9092),
    wire("confluent_cloud", "Confluent Cloud", STREAMING_PLATFORM, "Topics of a Confluent Cloud cluster (SASL over TLS)", Family::Kafka, 9092),
    wire("amazon_msk", "Amazon MSK", STREAMING_PLATFORM, "Topics of an Amazon MSK cluster (SASL/SCRAM)", Family::Kafka, 9096),
    wire("aiven_kafka", "Aiven for Apache Kafka", STREAMING_PLATFORM, "Topics of an Aiven Kafka service", Family::Kafka, 9092),
    wire("warpstream", "WarpStream", STREAMING_PLATFORM, "Topics of a WarpStream cluster (Kafka API)", Family::Kafka, 9092),
    // NATS JetStream.
    wire("nats", "NATS JetStream", STREAMING_PLATFORM, "Streams of a NATS server with JetStream", Family::Nats, 4222),
    // The Redis protocol.
    wire("redis", "Redis", CACHE, "Keys of a Redis server (strings, hashes, lists, sets, sorted sets)", Family::Redis, 6379),
    wire("valkey", "Valkey", CACHE, "Keys of a Valkey server (Redis protocol)", Family::Redis, 6379),
    wire("keydb", "KeyDB", CACHE, "Keys of a KeyDB server (Redis protocol)", Family::Redis, 6379),
    wire("dragonfly", "Dragonfly", CACHE, "Keys of a Dragonfly server (Redis protocol)", Family::Redis, 6379),
    wire("elasticache_redis", "Amazon ElastiCache for Redis", CACHE, "Keys of an ElastiCache (Redis OSS or Valkey) node", Family::Redis, 6379),
    wire("memorystore_redis", "Google Memorystore for Redis", CACHE, "Keys of a Memorystore for Redis instance", Family::Redis, 6379),
    wire("azure_cache_redis", "Azure Cache for Redis", CACHE, "Keys of an Azure Cache for Redis instance (TLS)", Family::Redis, 6380),
    wire("upstash_redis", "Upstash Redis", CACHE, "Keys of an Upstash Redis database (TLS)", Family::Redis, 6379),
    // AMQP 0-9-1.
    wire("rabbitmq", "RabbitMQ", QUEUE, "Queues of a RabbitMQ broker (AMQP 0-9-1)", Family::Amqp, 5672),
    wire("cloudamqp", "CloudAMQP", QUEUE, "Queues of a CloudAMQP instance", Family::Amqp, 5672),
    wire("lavinmq", "LavinMQ", QUEUE, "Queues of a LavinMQ broker (AMQP 0-9-1)", Family::Amqp, 5672),
    // MQTT.
    wire("mosquitto", "Eclipse Mosquitto", IOT, "Topics of a Mosquitto MQTT broker", Family::Mqtt, 1883),
    wire("emqx", "EMQX", IOT, "Topics of an EMQX MQTT broker", Family::Mqtt, 1883),
    wire("hivemq", "HiveMQ", IOT, "Topics of a HiveMQ MQTT broker", Family::Mqtt, 1883),
    wire("vernemq", "VerneMQ", IOT, "Topics of a VerneMQ MQTT broker", Family::Mqtt, 1883),
    wire("nanomq", "NanoMQ", IOT, "Topics of a NanoMQ MQTT broker", Family::Mqtt, 1883),
    // The Prometheus query API.
    metrics("prometheus", "Prometheus", "Metrics of a Prometheus server"),
    metrics("thanos", "Thanos", "Metrics of a Thanos Query (Prometheus API)"),
    metrics("mimir", "Grafana Mimir", "Metrics of Grafana Mimir (its Prometheus API under /prometheus)"),
    metrics("cortex", "Cortex", "Metrics of Cortex (Prometheus API)"),
    metrics("victoriametrics", "VictoriaMetrics", "Metrics of VictoriaMetrics (Prometheus API)"),
    metrics("grafana_cloud_metrics", "Grafana Cloud Metrics", "Metrics of a Grafana Cloud stack (basic auth)"),
    // HTTP APIs.
    Connector {
        id: "http_json",
        name: "HTTP JSON API",
        category: "api",
        description: "Records of a JSON answer of an HTTP API",
        family: Family::HttpJson,
        default_port: 0,
        schemes: &["http", "https"],
        needs_endpoint: false,
        service: "",
    },
];

/// The source type `id`.
pub fn connector(id: &str) -> Option<&'static Connector> {
    CONNECTORS.iter().find(|c| c.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_lower_snake_case() {
        let mut ids: Vec<&str> = CONNECTORS.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        let count = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), count, "a connector id is listed twice");
        for id in ids {
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{id}"
            );
        }
    }

    #[test]
    fn docs_connectors_md_lists_every_type() {
        let docs = include_str!("../../../../docs/connectors.md");
        for c in CONNECTORS {
            assert!(
                docs.contains(&format!("| `{}` | {} |", c.id, c.name)),
                "docs/connectors.md does not list {}",
                c.id
            );
        }
        assert!(docs.contains(&format!("{} types", CONNECTORS.len())));
    }

    #[test]
    fn every_wire_type_has_a_port_and_every_file_type_a_scheme() {
        for c in CONNECTORS {
            match c.family {
                Family::Postgres
                | Family::Mysql
                | Family::Kafka
                | Family::Nats
                | Family::Redis
                | Family::Amqp
                | Family::Mqtt => {
                    assert!(c.default_port > 0, "{}", c.id)
                }
                Family::ObjectStore
                | Family::SearchEngine
                | Family::HttpJson
                | Family::Prometheus => {
                    assert!(!c.schemes.is_empty(), "{}", c.id)
                }
                Family::Sqlite => {}
            }
        }
    }
}

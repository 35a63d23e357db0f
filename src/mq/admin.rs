//! Topic administration: create a lane topic (a topic's partition count is the client crate's,
//! `tidegate_client::kafka::partition_count`, which the producer and consumer read too).

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use super::{MqError, QUERY_TIMEOUT, client_config, lane_shape, partition_count};

/// Creates `topic` with `partitions` partitions (2 to `MAX_LANE_PARTITIONS`; whether the count is
/// a multiple of the table's zones is the producer's and the coordinator's check, see
/// `lane_shape`) and replication factor `replication`. An existing topic with the same partition
/// count is fine; one with another count is an error.
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    replication: i32,
) -> Result<(), MqError> {
    lane_shape(partitions).map_err(|source| MqError::Lane { topic: topic.to_owned(), source })?;
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[]).create()?;
    let new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(replication));
    let options = AdminOptions::new().operation_timeout(Some(QUERY_TIMEOUT));
    let results = admin.create_topics([&new], &options).await?;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                let bootstrap = bootstrap.to_owned();
                let name = topic.to_owned();
                let existing =
                    tokio::task::spawn_blocking(move || partition_count(&bootstrap, &name))
                        .await
                        .map_err(|e| MqError::Kafka(e.to_string()))??;
                if existing != partitions {
                    return Err(MqError::Kafka(format!(
                        "topic `{topic}` already exists with {existing} partitions, not {partitions}"
                    )));
                }
            }
            Err((name, code)) => {
                return Err(MqError::Kafka(format!("creating topic `{name}`: {code}")));
            }
        }
    }
    wait_until_visible(bootstrap, topic).await
}

/// CreateTopics answers once the controller has the topic, before every broker's metadata shows
/// it, so a producer made right after could still be told "no such topic". Waits (up to
/// `QUERY_TIMEOUT`) until the metadata shows it with its partitions.
async fn wait_until_visible(bootstrap: &str, topic: &str) -> Result<(), MqError> {
    let deadline = tokio::time::Instant::now() + QUERY_TIMEOUT;
    loop {
        let (b, t) = (bootstrap.to_owned(), topic.to_owned());
        let seen = tokio::task::spawn_blocking(move || partition_count(&b, &t))
            .await
            .map_err(|e| MqError::Kafka(e.to_string()))?;
        match seen {
            Ok(_) => return Ok(()),
            Err(MqError::NoSuchTopic(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

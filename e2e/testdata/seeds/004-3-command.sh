kafka-mirror-maker.sh \ 
--consumer.config ../config/consumer.properties \ #根据实际情况指定consumer.properteis 
--producer.config ../config/producer.properties \ #根据实际情况指定 producer.properties
--whitelist "testTopic"

// The Java client's transactional producer and read_committed consumer against camus:
// one committed and one aborted transaction, then every committed value read back.
// Run as a single-file program: java -cp 'KAFKA_LIBS/*' TransactionalRoundTrip.java BOOTSTRAP TOPIC TXN_ID
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TransactionalRoundTrip {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2];
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", txnId);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>(topic, 0, "k", "j-c" + i));
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 2; i++) p.send(new ProducerRecord<>(topic, 0, "k", "j-a" + i));
            p.flush();
            p.abortTransaction();
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 20000;
            while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) got.add(r.value());
            }
            System.out.println("end=" + end + " position=" + c.position(tp));
            System.out.println("values=" + String.join(",", got));
        }
    }
}
